/**
 * The model registry (LMSP section 5): registering GGUF files by content digest, checking their
 * integrity before every load, and the built-in `lmsp-tiny`.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { basename, join, resolve, sep } from 'node:path';
import { ServiceError, invalidRequest } from '../api/errors.js';
import type { ModelObject } from '../api/types.js';
import { EngineError } from '../engine/engine.js';
import { writeGgufFile } from '../engine/gguf-writer.js';
import { buildSyntheticModel, LMSP_TINY } from '../engine/synthetic-model.js';
import { MODEL_ID_PATTERN } from '../ids.js';
import type { Store, WriteContext } from '../store/index.js';
import { nowSeconds } from '../time.js';
import { readGgufFacts, validateBeforeLoad } from './gguf.js';
import { hashFile, type HashProgress } from './hashing.js';
import type { Model } from './types.js';

export const BUILTIN_MODEL_ID = 'lmsp-tiny';
const BUILTIN_REGISTERED_KEY = 'builtin.registered';

export interface RegisterOptions {
  /** API registrations must name a file inside the models directory (after resolving links). */
  restrictToModelsDir: boolean;
  onProgress?: HashProgress;
  /** Runs in the registration's transaction (idempotency keys, LMSP section 8). */
  alsoInTransaction?: (context: WriteContext, model: Model) => void;
}

export function toModelObject(model: Model, loaded: boolean, includePath: boolean): ModelObject {
  return {
    id: model.id,
    object: 'model',
    created: model.createdAt,
    owned_by: 'lmsp',
    digest: model.digest,
    size_bytes: model.sizeBytes,
    format: 'gguf',
    architecture: model.architecture,
    context_length: model.contextLength,
    parameters: model.parameters,
    quantization: model.quantization,
    tokenizer: model.tokenizer,
    status: model.status,
    loaded,
    ...(includePath ? { path: model.path } : {}),
  };
}

/** A model id from a file name: `Llama-3.2-1B.Q4_K_M.gguf` -> `llama-3.2-1b.q4_k_m`. */
export function modelIdFromPath(path: string): string {
  const id = basename(path).replace(/\.gguf$/i, '').toLowerCase().replace(/[^a-z0-9._:-]+/g, '-').replace(/^[^a-z0-9]+/, '');
  return id.slice(0, 128) || 'model';
}

function isInside(folder: string, path: string): boolean {
  return path === folder || path.startsWith(folder.endsWith(sep) ? folder : folder + sep);
}

export class ModelRegistry {
  constructor(private readonly store: Store, readonly modelsDir: string) {}

  list(): Model[] {
    return this.store.models.list();
  }

  get(id: string): Model | null {
    return this.store.models.get(id);
  }

  /** Validates, hashes and records a model file; nothing is written unless all of it succeeds. */
  async register(input: { path: string; id?: string | undefined }, options: RegisterOptions): Promise<Model> {
    if (input.id !== undefined && !MODEL_ID_PATTERN.test(input.id)) {
      throw invalidRequest('id', 'model ids are 1-128 characters of a-z, 0-9, ".", "_", ":" and "-", starting with a letter or digit');
    }
    const folder = options.restrictToModelsDir ? await realpath(this.modelsDir).catch(() => this.modelsDir) : null;
    const outside = () => invalidRequest('path', `the file must lie inside the models directory (${folder}), after resolving links`);
    let resolved: string;
    try {
      resolved = await realpath(input.path);
    } catch {
      // LMSP 5: a missing file outside the models directory gets the answer an existing one gets.
      if (folder !== null && !isInside(folder, resolve(input.path)) && !isInside(resolve(this.modelsDir), resolve(input.path))) throw outside();
      throw invalidRequest('path', `no file at ${input.path}`);
    }
    if (folder !== null && !isInside(folder, resolved)) throw outside();
    const info = await stat(resolved);
    if (!info.isFile()) throw new ServiceError('invalid_model_file', `${input.path} is not a regular file`, { param: 'path' });
    const id = input.id ?? modelIdFromPath(resolved);
    if (this.store.models.get(id)) throw invalidRequest('id', `a model with id '${id}' is already registered; remove it first`);
    const facts = await readGgufFacts(resolved);
    const digest = await hashFile(resolved, options.onProgress);
    const now = nowSeconds();
    const model: Model = {
      id, path: resolved, digest, sizeBytes: info.size, mtimeMs: Math.floor(info.mtimeMs), status: 'ready', builtin: false,
      createdAt: now, verifiedAt: now, ...facts,
    };
    return this.store.db.write((context) => {
      if (this.store.models.get(id)) throw invalidRequest('id', `a model with id '${id}' is already registered; remove it first`);
      this.store.models.insert(model);
      options.alsoInTransaction?.(context, model);
      return model;
    });
  }

  /** Unregisters (the file stays); refused while an unfinished task uses the model (LMSP section 5). */
  remove(id: string): Promise<Model> {
    return this.store.db.write(() => {
      const model = this.store.models.get(id);
      if (!model) throw new ServiceError('model_not_found', `no model with id '${id}'`);
      if (this.store.tasks.countUnfinishedForModel(id) > 0) throw new ServiceError('model_in_use', `an unfinished task uses '${id}'`);
      this.store.models.delete(id);
      return model;
    });
  }

  /** Re-hashes on demand and records what the file is now: ready, missing or digest_mismatch. */
  async verify(id: string, onProgress?: HashProgress): Promise<Model> {
    const model = this.store.models.get(id);
    if (!model) throw new ServiceError('model_not_found', `no model with id '${id}'`);
    let status: Model['status'];
    let info: Awaited<ReturnType<typeof stat>> | null = null;
    try {
      info = await stat(model.path);
      const digest = await hashFile(model.path, onProgress);
      status = digest === model.digest ? 'ready' : 'digest_mismatch';
    } catch {
      status = 'missing';
    }
    const now = nowSeconds();
    const updated: Model = {
      ...model,
      status,
      verifiedAt: now,
      // A file that hashes to its recorded digest again is known good at its current size/mtime.
      ...(status === 'ready' && info ? { sizeBytes: Number(info.size), mtimeMs: Math.floor(Number(info.mtimeMs)) } : {}),
    };
    await this.store.db.write(() => this.store.models.updateFile(updated));
    return updated;
  }

  /**
   * LMSP section 5, integrity before loading: size and mtime against the record, and a re-hash
   * on any change. A changed digest fails the task (`model_digest_mismatch`) and marks the model.
   */
  async checkBeforeLoad(id: string): Promise<Model> {
    const model = this.store.models.get(id);
    if (!model) throw new EngineError('model_not_found', `the model '${id}' is no longer registered`);
    let info;
    try {
      info = await stat(model.path);
    } catch {
      await this.store.db.write(() => this.store.models.setStatus(id, 'missing'));
      throw new EngineError('model_not_found', `the file of model '${id}' is missing`);
    }
    if (info.size === model.sizeBytes && Math.floor(info.mtimeMs) === model.mtimeMs) {
      if (model.status === 'digest_mismatch') {
        throw new EngineError('model_digest_mismatch', `the file of model '${id}' does not match its digest ${model.digest}`);
      }
      if (model.status === 'missing') await this.store.db.write(() => this.store.models.setStatus(id, 'ready'));
      await validateBeforeLoad(model);
      return model;
    }
    const digest = await hashFile(model.path);
    if (digest !== model.digest) {
      await this.store.db.write(() => this.store.models.setStatus(id, 'digest_mismatch', nowSeconds()));
      throw new EngineError('model_digest_mismatch', `the file of model '${id}' changed: its digest is now ${digest}, not ${model.digest}`);
    }
    await validateBeforeLoad(model);
    const updated: Model = { ...model, sizeBytes: info.size, mtimeMs: Math.floor(info.mtimeMs), status: 'ready', verifiedAt: nowSeconds() };
    await this.store.db.write(() => this.store.models.updateFile(updated));
    return updated;
  }

  /**
   * The built-in model: written by our own code into the models directory and registered on the
   * first start of a data directory, so a fresh install serves requests with nothing to download.
   */
  async ensureBuiltin(): Promise<void> {
    if (this.store.config.get(BUILTIN_REGISTERED_KEY)) return;
    mkdirSync(this.modelsDir, { recursive: true, mode: 0o755 });
    const path = join(this.modelsDir, `${BUILTIN_MODEL_ID}.gguf`);
    const written = !existsSync(path);
    if (written) writeGgufFile(path, buildSyntheticModel(LMSP_TINY));
    if (!this.store.models.get(BUILTIN_MODEL_ID)) {
      // LMSP 5: every file goes through the validator, ours too (one left from an earlier start may be anything).
      const facts = await readGgufFacts(path);
      const digest = await hashFile(path);
      const info = await stat(path);
      const now = nowSeconds();
      await this.store.db.write(() => {
        if (!this.store.models.get(BUILTIN_MODEL_ID)) {
          this.store.models.insert({
            id: BUILTIN_MODEL_ID, path, digest, sizeBytes: info.size, mtimeMs: Math.floor(info.mtimeMs), status: 'ready',
            builtin: true, createdAt: now, verifiedAt: now, ...facts,
          });
        }
      });
    }
    await this.store.db.write(() => this.store.config.set(BUILTIN_REGISTERED_KEY, String(nowSeconds())));
  }
}
