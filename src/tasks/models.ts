/**
 * The use cases of the model registry (LMSP section 5): register, verify, remove and list, the
 * same for the HTTP API and for the CLI working on a stopped service's data directory.
 */
import type { ModelObject } from '../api/types.js';
import { toModelObject } from '../api/views.js';
import type { Model } from '../domain/models.js';
import type { Engine } from '../engine/engine.js';
import type { HashProgress } from '../models/hashing.js';
import { modelNotFound, type InspectOptions } from '../models/registry.js';
import type { IdempotencyKey, StoredAnswer } from '../store/index.js';
import type { TaskCore } from './core.js';
import { assertNotBeingPulled } from './pulls.js';

/** What the model use cases need: the engine only to tell which models are loaded, when there is one. */
export type ModelDeps = Pick<TaskCore, 'store' | 'registry'> & { engine?: Pick<Engine, 'isLoaded' | 'unloadModel'> };

export type ModelOutcome = { replay: StoredAnswer } | { model: ModelObject };

/**
 * A model as a client sees it, its status as the file stands now (a file deleted since shows
 * `missing` at once); `path` only for clients that may register models.
 */
export function modelView(deps: ModelDeps, model: Model, includePath: boolean): ModelObject {
  return toModelObject(deps.registry.observe(model), deps.engine?.isLoaded(model) ?? false, includePath);
}

export function listModels(deps: ModelDeps, includePath: boolean): ModelObject[] {
  return deps.registry.list().map((model) => modelView(deps, model, includePath));
}

export function getModel(deps: ModelDeps, id: string, includePath: boolean): ModelObject {
  const model = deps.registry.get(id);
  if (!model) throw modelNotFound(id);
  return modelView(deps, model, includePath);
}

/** Validates and hashes the file first, then records the model and the key's answer in one transaction. */
export async function registerModel(deps: ModelDeps, input: { path: string; id?: string | undefined }, options: InspectOptions,
  key: IdempotencyKey | null, actor: string | null = null): Promise<ModelOutcome> {
  const outcome = await deps.store.idempotent(key, {
    actor,
    prepare: () => deps.registry.inspect(input, options),
    effect: (_context, model) => {
      assertNotBeingPulled(deps, model.id);
      deps.registry.insert(model);
      const view = modelView(deps, model, true);
      return { result: view, record: { answer: { status: 201, body: view } } };
    },
  });
  return 'replay' in outcome ? outcome : { model: outcome.result };
}

/** Re-hashes the file, then records what it is now with the key's answer in one transaction. */
export async function verifyModel(deps: ModelDeps, id: string, key: IdempotencyKey | null, onProgress?: HashProgress,
  actor: string | null = null): Promise<ModelOutcome> {
  const outcome = await deps.store.idempotent(key, {
    actor,
    prepare: async () => {
      const measured = await deps.registry.measure(id, onProgress);
      // As after a task: a model whose file no longer matches its digest is not kept loaded.
      if (measured.status === 'digest_mismatch') deps.engine?.unloadModel(measured);
      return measured;
    },
    effect: (_context, measured) => {
      const view = modelView(deps, deps.registry.recordVerification(measured), true);
      return { result: view, record: { answer: { status: 200, body: view } } };
    },
  });
  return 'replay' in outcome ? outcome : { model: outcome.result };
}

/**
 * Unregisters a model (the file stays); 409 `model_in_use` while an unfinished task uses it. Its
 * memory is given back now, unless another registered model is the same file.
 */
export async function removeModel(deps: ModelDeps, id: string): Promise<{ id: string; object: 'model'; deleted: true }> {
  const removed = await deps.registry.remove(id);
  if (!deps.registry.list().some((model) => model.path === removed.path && model.digest === removed.digest)) deps.engine?.unloadModel(removed);
  return { id, object: 'model', deleted: true };
}
