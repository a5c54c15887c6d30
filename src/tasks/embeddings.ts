/**
 * The use case of `POST /v1/embeddings` (LMSP section 14): answered directly, not as a task.
 * The inputs are checked here, each refusal naming its `param`; the engine computes the vectors
 * on a runner that holds the model and refuses what only it can judge (a token id outside the
 * vocabulary, an input longer than the context, `dimensions` wider than the model's).
 *
 * Idempotency-Key (LMSP 8), where the spec is silent for a request without effects: the key,
 * its fingerprint and the model's digest are recorded, not the vectors (up to 2048 of them, too
 * large to keep for a day). A repeat with the same key and body is computed again and, because
 * embeddings are deterministic for a model and input, answers the same body, marked
 * `Idempotent-Replayed: true`; another body gets 422 `idempotency_key_reused`, and so does a
 * repeat after the model's file changed, whose first answer can no longer be given. Two requests
 * with the same key at the same time both compute (there is no effect to hold in flight), so
 * `idempotency_key_in_flight` never arises here. Without a key nothing is written.
 */
import { toEmbeddingList, type CreateEmbeddingBody, type EmbeddingList } from '../api/embeddings.js';
import { ServiceError, invalidRequest, modelFaultError } from '../domain/errors.js';
import type { Model } from '../domain/models.js';
import { EngineError, EngineInputError, MAX_EMBEDDING_INPUTS, modelRefOf, type EmbeddingInput } from '../engine/engine.js';
import type { IdempotencyKey, StoredAnswer } from '../store/index.js';
import type { TaskCore } from './core.js';
import { withoutPaths } from './scheduler.js';

/** What a key records in place of the vectors: enough to tell that a recomputation answers the same. */
interface RecordedEmbeddings {
  object: 'embedding.list.recorded';
  model: string;
  digest: string;
}

function checkTokenIds(ids: unknown[], param: string): void {
  if (ids.length === 0) throw invalidRequest(param, `'${param}' must not be an empty array of token ids.`);
  ids.forEach((id, index) => {
    if (!Number.isInteger(id) || (id as number) < 0) throw invalidRequest(`${param}[${index}]`, `'${param}[${index}]' must be a token id (an integer from 0).`);
  });
}

/**
 * The wire `input` as the engine's list of inputs: a string, an array of strings, an array of
 * token ids (one input) or an array of such arrays; 1 to 2048 inputs, none empty.
 */
export function embeddingInputs(input: unknown): { inputs: EmbeddingInput[]; single: boolean } {
  if (typeof input === 'string') {
    if (input.length === 0) throw invalidRequest('input', "'input' must not be an empty string.");
    return { inputs: [input], single: true };
  }
  if (!Array.isArray(input)) throw invalidRequest('input', "'input' must be a string, an array of strings, an array of token ids or an array of arrays of token ids.");
  if (input.length === 0) throw invalidRequest('input', "'input' must not be an empty array.");
  if (typeof input[0] === 'number') {
    checkTokenIds(input, 'input');
    return { inputs: [input as number[]], single: true };
  }
  if (input.length > MAX_EMBEDDING_INPUTS) {
    throw invalidRequest('input', `'input' holds ${input.length} inputs; at most ${MAX_EMBEDDING_INPUTS} are allowed in one request.`);
  }
  const strings = typeof input[0] === 'string';
  if (!strings && !Array.isArray(input[0])) throw invalidRequest('input[0]', "'input[0]' must be a string, a token id or an array of token ids.");
  input.forEach((item: unknown, index) => {
    const param = `input[${index}]`;
    if (strings) {
      if (typeof item !== 'string') throw invalidRequest(param, `'${param}' must be a string, as the first input is.`);
      if (item.length === 0) throw invalidRequest(param, `'${param}' must not be an empty string.`);
    } else {
      if (!Array.isArray(item)) throw invalidRequest(param, `'${param}' must be an array of token ids, as the first input is.`);
      checkTokenIds(item, param);
    }
  });
  return { inputs: input as EmbeddingInput[], single: false };
}

/** An engine refusal as the client's error: its param names the wire field. */
function toServiceError(error: unknown, single: boolean): unknown {
  if (error instanceof EngineInputError) {
    // One input sent alone is `input` itself: its own refusal names `input`, one of its token ids `input[k]`.
    const param = !single ? error.param : error.param === 'input[0]' ? 'input' : error.param.replace(/^input\[0\]\[/, 'input[');
    const message = single && error.message.startsWith(`${error.param} `) ? `${param}${error.message.slice(error.param.length)}` : error.message;
    return new ServiceError(error.code, message, { param });
  }
  if (error instanceof EngineError) {
    if (error.code === 'model_not_found') return new ServiceError('model_not_found', error.message, { param: 'model' });
    // llama.cpp's own messages may name files: the client sees them without paths, as task errors.
    const message = withoutPaths(`${error.code}: ${error.message}`);
    // A changed or unloadable file is the file's fault: a 4xx naming the model, which stays so
    // until the operator acts (x-should-retry: false). One that loads but that the engine cannot
    // compute with (llama.cpp aborting on it, a vector it cannot give) is the engine's failure,
    // not a bug of the service.
    return modelFaultError(error.code, message) ?? new ServiceError('engine_error', message, { cause: error });
  }
  return error;
}

async function compute(core: Pick<TaskCore, 'registry' | 'engine'>, model: Model, body: CreateEmbeddingBody,
  signal?: AbortSignal): Promise<EmbeddingList> {
  const { inputs, single } = embeddingInputs(body.input);
  try {
    // LMSP 5: the file is checked against its record before a runner loads it, and is still that
    // file once loaded, and at each use of a runner that holds it.
    const loaded = core.engine.isLoaded(model);
    if (loaded) await core.registry.checkLoaded(model.id);
    const verified = loaded ? null : await core.registry.checkBeforeLoad(model.id);
    const result = await core.engine.embed(modelRefOf(model),
      { inputs, ...(body.dimensions != null ? { dimensions: body.dimensions } : {}) }, signal,
      verified ? core.registry.confirmUnchanged(verified) : undefined);
    return toEmbeddingList(model.id, result, body.encoding_format ?? 'float');
  } catch (error) {
    // As after a generation: a model whose file no longer matches its digest is not kept loaded.
    if (error instanceof EngineError && error.code === 'model_digest_mismatch') core.engine.unloadModel(modelRefOf(model));
    throw toServiceError(error, single);
  }
}

function recordedOf(answer: StoredAnswer): RecordedEmbeddings | null {
  const body = answer.body as Partial<RecordedEmbeddings> | undefined;
  return body?.object === 'embedding.list.recorded' ? body as RecordedEmbeddings : null;
}

export async function createEmbeddings(core: Pick<TaskCore, 'store' | 'registry' | 'engine'>, body: CreateEmbeddingBody,
  key: IdempotencyKey | null, signal?: AbortSignal): Promise<{ list: EmbeddingList; replayed: boolean }> {
  const model = core.registry.get(body.model);
  if (!model) throw new ServiceError('model_not_found', `The model '${body.model}' does not exist.`, { param: 'model' });
  if (!key) return { list: await compute(core, model, body, signal), replayed: false };

  const outcome = await core.store.idempotent(key, {
    prepare: () => compute(core, model, body, signal),
    effect: (_context, list) => {
      const recorded: RecordedEmbeddings = { object: 'embedding.list.recorded', model: model.id, digest: model.digest };
      return { result: list, record: { answer: { status: 200, body: recorded } } };
    },
  });
  if ('result' in outcome) return { list: outcome.result, replayed: false };
  const recorded = recordedOf(outcome.replay);
  if (!recorded || recorded.digest !== model.digest) {
    throw new ServiceError('idempotency_key_reused',
      `This Idempotency-Key was used when the model '${model.id}' had another file; the same answer cannot be given again: use a new key.`);
  }
  return { list: await compute(core, model, body, signal), replayed: true };
}
