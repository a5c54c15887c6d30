/**
 * The model registry (LMSP section 5): registering GGUF files by content digest, checking their
 * integrity before every load, and the built-in `lmsp-tiny`.
 */
import { existsSync, lstatSync, mkdirSync, realpathSync } from 'node:fs';
import { lstat, readlink, realpath, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { ServiceError, invalidRequest } from '../domain/errors.js';
import { fileStampOf, MODEL_ID_PATTERN, sameFile, type Model } from '../domain/models.js';
import { EngineError, type LoadConfirmation } from '../engine/engine.js';
import { writeGgufFile } from '../engine/gguf-writer.js';
import { buildSyntheticModel, LMSP_TINY } from '../engine/synthetic-model.js';
import type { Store } from '../store/index.js';
import { nowSeconds } from '../time.js';
import { readGgufFacts, validateBeforeLoad } from './gguf.js';
import { invalidModelFile } from './gguf-validator.js';
import { ChangedWhileReadError, hashFile, isInside, LinkedPathError, NotRegularFileError, type HashProgress } from './hashing.js';

export const BUILTIN_MODEL_ID = 'lmsp-tiny';
const BUILTIN_REGISTERED_KEY = 'builtin.registered';
/** The data directory's real path at the last start, to tell when it has moved. */
const DATA_DIR_KEY = 'data_dir.real_path';

export interface InspectOptions {
  /** API registrations must name a file inside the models directory (after resolving links). */
  restrictToModelsDir: boolean;
  onProgress?: HashProgress;
}

/** A model id from a file name: `Llama-3.2-1B.Q4_K_M.gguf` -> `llama-3.2-1b.q4_k_m`. */
export function modelIdFromPath(path: string): string {
  const id = basename(path).replace(/\.gguf$/i, '').toLowerCase().replace(/[^a-z0-9._:-]+/g, '-').replace(/^[^a-z0-9]+/, '');
  return id.slice(0, 128) || 'model';
}

/** The real path of a file; a missing one is a 400 that shows the path as the client gave it. */
async function resolveFile(path: string, shown: string): Promise<string> {
  try {
    return await realpath(path);
  } catch {
    throw invalidRequest('path', `no file at ${shown}`);
  }
}

/** The same 404 on every route that names a model by id, as `GET /v1/models/{id}` answers it. */
export function modelNotFound(id: string): ServiceError {
  return new ServiceError('model_not_found', `The model '${id}' does not exist.`, { param: 'id' });
}

/**
 * Whether a path inside `folder` that cannot be resolved leads outside it through its links
 * (LMSP 5: the answer for a broken link must not depend on what exists outside). Follows the
 * links one component at a time and never looks at anything outside `folder`.
 */
async function leadsOutside(folder: string, path: string): Promise<boolean> {
  const pending = relative(folder, path).split(sep).filter((part) => part !== '' && part !== '.');
  let current = folder;
  for (let links = 0; pending.length > 0;) {
    const next = resolve(current, pending.shift()!);
    if (!isInside(folder, next)) return true;
    let target: string | null = null;
    try {
      if ((await lstat(next)).isSymbolicLink()) target = resolve(current, await readlink(next));
    } catch {
      return false; // missing, inside
    }
    if (target === null) {
      current = next;
      continue;
    }
    if (!isInside(folder, target)) return true;
    if (++links > 40) return false;
    pending.unshift(...relative(folder, target).split(sep).filter((part) => part !== ''));
    current = folder;
  }
  return false;
}

/** A hash that failed because what stands at a model's path is not the file that was registered. */
function notThisModelsFile(error: unknown): boolean {
  return error instanceof LinkedPathError || error instanceof NotRegularFileError || error instanceof ChangedWhileReadError;
}

/** LMSP 5, 9: a file that changed or went away while it was being registered is the client's 400, never a 500. */
function unreadableForRegistration(error: unknown): ServiceError {
  if (error instanceof ChangedWhileReadError) return invalidModelFile('it changed while it was read; register it again once nothing writes to it');
  if (error instanceof NotRegularFileError || error instanceof LinkedPathError) return invalidModelFile('it was replaced while it was read, by something that is not a regular file inside the models directory');
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return invalidModelFile('it was removed while it was read');
  // An I/O error of the file itself: its code, never its path.
  return invalidModelFile(`the file cannot be read (${code ?? 'error'})`);
}

export class ModelRegistry {
  constructor(private readonly store: Store, readonly modelsDir: string) {}

  list(): Model[] {
    return this.store.models.list();
  }

  get(id: string): Model | null {
    return this.store.models.get(id);
  }

  /**
   * Validates and hashes a file to register; writes nothing (LMSP section 5). The model it
   * returns is recorded by `insert`, in the transaction of the registration.
   */
  async inspect(input: { path: string; id?: string | undefined }, options: InspectOptions): Promise<Model> {
    if (input.id !== undefined && !MODEL_ID_PATTERN.test(input.id)) {
      throw invalidRequest('id', 'model ids are 1-128 characters of a-z, 0-9, ".", "_", ":" and "-", starting with a letter or digit');
    }
    const resolved = options.restrictToModelsDir ? await this.resolveInModelsDir(input.path) : await resolveFile(input.path, input.path);
    const info = await stat(resolved, { bigint: true });
    if (!info.isFile()) throw invalidModelFile('the path does not name a regular file');
    // A pull writes, truncates and removes its partial file: a model registered there would lose its file.
    if (resolved.endsWith('.partial')) throw invalidRequest('path', "the file is a pull's partial download (<id>.gguf.partial), not a model");
    // The name the client gave, not the one a link leads to.
    const id = input.id ?? modelIdFromPath(input.path);
    this.assertFree(id);
    const within = await this.realModelsDirs();
    const facts = await readGgufFacts(resolved, { within });
    const { digest, stamp } = await hashFile(resolved, within, options.onProgress).catch((error: unknown) => {
      throw unreadableForRegistration(error);
    });
    // The file validated, hashed and recorded is one file, unchanged from the first look to the last byte.
    if (!sameFile(fileStampOf(info), stamp)) throw unreadableForRegistration(new ChangedWhileReadError(resolved));
    const now = nowSeconds();
    return {
      id, path: resolved, digest, ...stamp, status: 'ready', builtin: false, createdAt: now, verifiedAt: now, ...facts,
    };
  }

  /**
   * LMSP 5: the file an API client names must lie inside the models directory after resolving
   * links, and the answer never tells whether a file exists outside it: a path outside is
   * refused before the file system is asked, and a link that leads outside gets the same answer
   * as a path outside. No answer shows where the models directory is.
   */
  private async resolveInModelsDir(path: string): Promise<string> {
    const folder = await realpath(this.modelsDir).catch(() => resolve(this.modelsDir));
    const outside = () => invalidRequest('path', 'the file must lie inside the models directory (a relative path starts there)');
    const named = resolve(folder, path);
    if (!isInside(folder, named) && !isInside(resolve(this.modelsDir), resolve(this.modelsDir, path))) throw outside();
    // The kernel reads `..` after the links before it; a check by the text would read it before
    // them, and could register another file than the one named. A path names a file from the
    // models directory down.
    if (path.split(sep === '/' ? '/' : /[\\/]/).includes('..')) throw invalidRequest('path', "the path must not hold '..': name the file from the models directory down");
    const shown = relative(folder, named) || '.';
    let resolved: string;
    try {
      // As given (`file.gguf/` is no file), resolved by the kernel.
      resolved = await resolveFile(isAbsolute(path) ? path : `${folder}${sep}${path}`, path.endsWith('/') ? `${shown}/` : shown);
    } catch (error) {
      // A broken link that points outside says nothing about what is there either.
      if (await leadsOutside(folder, named)) throw outside();
      throw error;
    }
    if (!isInside(folder, resolved)) throw outside();
    return resolved;
  }

  /**
   * Where the models directories really are (links resolved), those that exist: the one in use,
   * and the data directory's own, where pulls of a service run with another `--models-dir` put
   * their files.
   */
  async realModelsDirs(): Promise<string[]> {
    const folders = [this.modelsDir, join(dirname(this.store.db.path), 'models')]; // the default of config.ts
    const real = await Promise.all(folders.map((folder) => realpath(folder).catch(() => null)));
    return real.filter((folder) => folder !== null);
  }

  /** LMSP 5.1, 9: an id already registered is 409 `model_exists`, for a registration as for a pull. */
  private assertFree(id: string): void {
    if (this.store.models.get(id)) {
      throw new ServiceError('model_exists', `A model with id '${id}' is already registered; choose another id, or remove it first.`, { param: 'id' });
    }
  }

  /** Records an inspected model; call inside the registration's transaction (the id may have been taken meanwhile). */
  insert(model: Model): void {
    this.assertFree(model.id);
    this.store.models.insert(model);
  }

  /** Unregisters (the file stays); refused while an unfinished task uses the model (LMSP section 5). */
  remove(id: string): Promise<Model> {
    return this.store.db.write(() => {
      const model = this.store.models.get(id);
      if (!model) throw modelNotFound(id);
      if (this.store.tasks.countUnfinishedForModel(id) > 0) throw new ServiceError('model_in_use', `an unfinished task uses '${id}'`);
      this.store.models.delete(id);
      return model;
    });
  }

  /**
   * Re-hashes a model's file on demand and returns what it is now: ready, missing or
   * digest_mismatch. Writes nothing; `recordVerification` does, in the request's transaction.
   */
  async measure(id: string, onProgress?: HashProgress): Promise<Model> {
    const model = this.store.models.get(id);
    if (!model) throw modelNotFound(id);
    let status: Model['status'];
    let stamp = null;
    try {
      // What stands at the registered path now is not the file that was registered (a link
      // planted there or at a folder above it, a pipe, a file written to while it is read):
      // not followed, not read, not this model's.
      const hashed = await hashFile(model.path, await this.realModelsDirs(), onProgress);
      status = hashed.digest === model.digest ? 'ready' : 'digest_mismatch';
      stamp = hashed.stamp;
    } catch (error) {
      status = notThisModelsFile(error) ? 'digest_mismatch' : 'missing';
    }
    return {
      ...model,
      status,
      verifiedAt: nowSeconds(),
      // A file that hashes to its recorded digest again is known good as it is stamped now.
      ...(status === 'ready' && stamp ? stamp : {}),
    };
  }

  /**
   * A model as a reader sees it: its recorded status, corrected by a look at the file (no hash,
   * no write). A file gone is `missing`; a link or anything but a regular file at its path is
   * `digest_mismatch`, as the check before a load would find, and so is a file of another size
   * than the one hashed (its bytes cannot be those); a file back at its recorded size and
   * modification time after it went missing is `ready` again. A changed time alone keeps the
   * recorded status: only a hash can tell, and the check before a load makes it.
   */
  observe(model: Model): Model {
    let info;
    let real;
    try {
      info = lstatSync(model.path, { bigint: true });
      real = realpathSync(model.path);
    } catch {
      return { ...model, status: 'missing' };
    }
    // The path was recorded as the file's real path: a link put at it, or at a folder above it,
    // leads to another file. (The same file reached through a folder moved and linked back, a
    // data directory moved, say, is the same device and inode.)
    if (!info.isFile()) return { ...model, status: 'digest_mismatch' };
    if (real !== model.path && !model.fileIdentity?.startsWith(`${info.dev}:${info.ino}:`)) return { ...model, status: 'digest_mismatch' };
    if (Number(info.size) !== model.sizeBytes) return { ...model, status: 'digest_mismatch' };
    if (model.status === 'missing' && Number(info.size) === model.sizeBytes && Number(info.mtimeMs) === model.mtimeMs) return { ...model, status: 'ready' };
    return model;
  }

  /**
   * Records a verification; call inside the request's transaction. The model may have been
   * removed while its file was hashed, and its id registered again for another file: what was
   * hashed is then no model's, and is not written over the new registration.
   */
  recordVerification(model: Model): Model {
    const current = this.store.models.get(model.id);
    if (!current) throw modelNotFound(model.id);
    if (current.path !== model.path || current.digest !== model.digest || current.createdAt !== model.createdAt) {
      throw new ServiceError('model_not_found', `The model '${model.id}' was removed while its file was verified, and its id registered again; verify it again.`, { param: 'id' });
    }
    this.store.models.updateFile(model);
    return model;
  }

  /**
   * LMSP section 5, integrity before loading: size and mtime against the record, and a re-hash
   * on any change. A changed digest fails the task (`model_digest_mismatch`) and marks the model.
   * The file's inode and change time count as well: `touch` sets a modification time back, and
   * nothing but the kernel sets a change time.
   */
  async checkBeforeLoad(id: string): Promise<Model> {
    const model = this.store.models.get(id);
    if (!model) throw new EngineError('model_not_found', `the model '${id}' is no longer registered`);
    let info;
    try {
      // The registered path is the file's real path: lstat, so that a link planted there since
      // is seen as a change and never followed (its target may lie outside the models directory).
      info = await lstat(model.path, { bigint: true });
    } catch {
      await this.store.db.write(() => this.store.models.setStatus(id, 'missing'));
      throw new EngineError('model_not_found', `the file of model '${id}' is missing`);
    }
    if (!info.isFile()) {
      await this.store.db.write(() => this.store.models.setStatus(id, 'digest_mismatch', nowSeconds()));
      throw new EngineError('model_digest_mismatch', `the file of model '${id}' was replaced by something that is not a regular file (a link is not followed)`);
    }
    const stamp = fileStampOf(info);
    const within = await this.realModelsDirs();
    if (sameFile(model, stamp)) {
      if (model.status === 'digest_mismatch') {
        throw new EngineError('model_digest_mismatch', `the file of model '${id}' does not match its digest ${model.digest}`);
      }
      if (model.status === 'missing') await this.store.db.write(() => this.store.models.setStatus(id, 'ready'));
      await validateBeforeLoad(model, within);
      return model;
    }
    let hashed;
    try {
      hashed = await hashFile(model.path, within);
    } catch (error) {
      if (!notThisModelsFile(error)) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        await this.store.db.write(() => this.store.models.setStatus(id, 'missing'));
        throw new EngineError('model_not_found', `the file of model '${id}' is missing`);
      }
      await this.store.db.write(() => this.store.models.setStatus(id, 'digest_mismatch', nowSeconds()));
      const why = error instanceof LinkedPathError ? 'now lies behind a link, which is not followed (its target may lie outside the models directory)'
        : error instanceof NotRegularFileError ? 'was replaced by something that is not a regular file' : 'changed while it was read';
      throw new EngineError('model_digest_mismatch', `the file of model '${id}' ${why}`);
    }
    if (hashed.digest !== model.digest) {
      await this.store.db.write(() => this.store.models.setStatus(id, 'digest_mismatch', nowSeconds()));
      throw new EngineError('model_digest_mismatch', `the file of model '${id}' changed: its digest is now ${hashed.digest}, not ${model.digest}`);
    }
    await validateBeforeLoad(model, within);
    const updated: Model = { ...model, ...hashed.stamp, status: 'ready', verifiedAt: nowSeconds() };
    await this.store.db.write(() => this.store.models.updateFile(updated));
    return updated;
  }

  /**
   * LMSP 5 for a model a runner holds already, before each use: llama.cpp maps the file, so an
   * edit in place reaches the loaded model, and a file cut short ends its runner (SIGBUS). The
   * file's stamp is compared with the record (one lstat); a change is checked as before a load
   * (hashed again), and a changed digest fails the request and marks the model.
   */
  async checkLoaded(id: string): Promise<void> {
    const model = this.store.models.get(id);
    if (!model) throw new EngineError('model_not_found', `the model '${id}' is no longer registered`);
    const info = await lstat(model.path, { bigint: true }).catch(() => null);
    if (model.status === 'ready' && info?.isFile() && sameFile(model, fileStampOf(info))) return;
    await this.checkBeforeLoad(id);
  }

  /**
   * For the engine to call once a runner has loaded `verified` (what `checkBeforeLoad` returned):
   * the file must still be the one checked, or the runner may have read other bytes than those
   * hashed (a file renamed into place, or edited, between the check and the load). Nothing is
   * marked: the next load hashes the file again and records what it finds.
   */
  confirmUnchanged(verified: Model): LoadConfirmation {
    return async () => {
      const info = await lstat(verified.path, { bigint: true }).catch(() => null);
      if (!info?.isFile() || !sameFile(verified, fileStampOf(info))) {
        throw new EngineError('model_digest_mismatch', `the file of model '${verified.id}' changed while it loaded; it is checked again at its next use`);
      }
    };
  }

  /**
   * A data directory moved, renamed or restored elsewhere carries its model files with it: a model
   * recorded inside the folder it was in last time is the file at the same place inside this one
   * (checked as any file is before it loads, and `missing` if it is not there), never the other
   * folder's. Answers how many moved.
   */
  async followDataDir(): Promise<number> {
    const now = await realpath(dirname(this.store.db.path));
    const before = this.store.config.get(DATA_DIR_KEY);
    if (before === now) return 0;
    const moved = before === null ? [] : this.store.models.list().flatMap((model) => {
      if (!model.path.startsWith(`${before}${sep}`)) return [];
      return [{ ...model, path: join(now, relative(before, model.path)) }];
    });
    await this.store.db.write(() => {
      for (const model of moved) this.store.models.updateFile(model);
      this.store.config.set(DATA_DIR_KEY, now);
    });
    return moved.length;
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
      // Recorded by its real path, as every registered file is.
      const real = await realpath(path);
      const info = await stat(real, { bigint: true });
      const within = await this.realModelsDirs();
      const facts = await readGgufFacts(real, { within });
      const { digest } = await hashFile(real, within);
      const now = nowSeconds();
      await this.store.db.write(() => {
        if (!this.store.models.get(BUILTIN_MODEL_ID)) {
          this.store.models.insert({
            id: BUILTIN_MODEL_ID, path: real, digest, ...fileStampOf(info), status: 'ready',
            builtin: true, createdAt: now, verifiedAt: now, ...facts,
          });
        }
      });
    }
    await this.store.db.write(() => this.store.config.set(BUILTIN_REGISTERED_KEY, String(nowSeconds())));
  }
}
