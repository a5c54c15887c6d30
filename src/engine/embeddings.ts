/**
 * Embeddings in the runner (LMSP 14), with node-llama-cpp's embedding context on the model the
 * runner holds. The pooling is the model's own: llama.cpp applies the GGUF's
 * `<arch>.pooling_type` (mean, cls, last); a model without one (a decoder such as lmsp-tiny)
 * has no pooling in llama.cpp, and node-llama-cpp then takes the state of the last token, as
 * decoder embedding models expect. Inputs are evaluated one at a time from an empty sequence in
 * fixed batches, so an input gets the same bits alone or in any batch, and on every call.
 */
import type { LlamaEmbeddingContext, LlamaModel, Token } from 'node-llama-cpp';
import type { EmbedMessage, RunnerMessage } from './protocol.js';
import { MAX_EMBEDDING_INPUTS, type EmbeddingPooling } from './types.js';
import { tokensAtLeast, vocabularyTokens } from './vocabulary.js';

/** Causal models evaluate long inputs in chunks of this many tokens (always the same). */
const CAUSAL_BATCH = 512;
/** Context sizes grow in these steps, so a cached context serves most requests. */
const CONTEXT_STEP = 512;

const POOLING_TYPES: Record<number, EmbeddingPooling> = { 0: 'last', 1: 'mean', 2: 'cls', 3: 'last', 4: 'rank' };

export function poolingOf(model: LlamaModel): EmbeddingPooling {
  const metadata = model.fileInfo.metadata as unknown as Record<string, Record<string, unknown> | undefined>;
  const architecture = String(metadata.general?.architecture ?? '');
  const value = metadata[architecture]?.pooling_type;
  return POOLING_TYPES[typeof value === 'number' ? value : 0] ?? 'last';
}

class InputError extends Error {
  constructor(readonly code: 'context_length_exceeded' | 'invalid_request', readonly param: string, message: string) {
    super(message);
  }
}

interface CachedContext {
  model: LlamaModel;
  size: number;
  context: LlamaEmbeddingContext;
  /** Requests computing on this context now. */
  users: number;
  /** Replaced by a larger one (or the model unloads): disposed once its last user is done. */
  retired: boolean;
}

/**
 * One embedding context per runner, kept while its model stays loaded. Requests on one runner
 * run concurrently (node-llama-cpp evaluates one input at a time on a context), so a request
 * that needs a larger context must not dispose the one another request is using: the old one
 * is retired and disposed when its last user is done.
 */
export class EmbeddingContexts {
  private cached: CachedContext | null = null;
  private creating: Promise<CachedContext> | null = null;

  constructor(private readonly threads: number) {}

  /** Runs `work` on a context of more than `tokens` tokens, which stays alive until it is done. */
  async use<T>(model: LlamaModel, tokens: number, work: (context: LlamaEmbeddingContext) => Promise<T> | T): Promise<T> {
    const entry = await this.acquire(model, tokens);
    try {
      return await work(entry.context);
    } finally {
      entry.users -= 1;
      if (entry.retired && entry.users === 0) await entry.context.dispose();
    }
  }

  private async acquire(model: LlamaModel, tokens: number): Promise<CachedContext> {
    while (this.creating) await this.creating.catch(() => undefined);
    const current = this.cached;
    if (current && current.model === model && current.size > tokens) {
      current.users += 1;
      return current;
    }
    const size = Math.ceil((tokens + 1) / CONTEXT_STEP) * CONTEXT_STEP;
    const causal = !(model.fileInsights.hasEncoder && !model.fileInsights.hasDecoder);
    this.creating = (async () => {
      await this.dispose();
      const context = await model.createEmbeddingContext({ contextSize: size, batchSize: causal ? Math.min(size, CAUSAL_BATCH) : size, threads: this.threads });
      return { model, size, context, users: 0, retired: false };
    })();
    try {
      const created = await this.creating;
      created.users += 1;
      this.cached = created;
      return created;
    } finally {
      this.creating = null;
    }
  }

  /** Retires the cached context: disposed now, or when the requests using it are done. */
  async dispose(): Promise<void> {
    const cached = this.cached;
    this.cached = null;
    if (!cached) return;
    cached.retired = true;
    if (cached.users === 0) await cached.context.dispose();
  }
}

/** Token ids outside the vocabulary abort llama.cpp, so they are refused first. */
export function vocabularySize(model: LlamaModel): number {
  return vocabularyTokens(model)?.length ?? 0;
}

/** LMSP 14: L2-normalised; null for a vector of zeros, which has no direction to keep. */
function normalize(vector: readonly number[], dimensions: number): number[] | null {
  const kept = vector.slice(0, dimensions);
  let sum = 0;
  for (const value of kept) sum += value * value;
  const norm = Math.sqrt(sum);
  return norm === 0 || !Number.isFinite(norm) ? null : kept.map((value) => value / norm);
}

/** Validates the inputs and returns them as token lists (with the model's BOS/EOS added later by node-llama-cpp). */
function resolveInputs(model: LlamaModel, message: EmbedMessage): Array<string | Token[]> {
  const { inputs } = message;
  if (!Array.isArray(inputs) || inputs.length === 0 || inputs.length > MAX_EMBEDDING_INPUTS) {
    throw new InputError('invalid_request', 'input', `input must hold 1 to ${MAX_EMBEDDING_INPUTS} items`);
  }
  const vocabulary = vocabularySize(model);
  return inputs.map((input, index) => {
    if (typeof input === 'string') {
      if (input.length === 0) throw new InputError('invalid_request', `input[${index}]`, 'an input must not be empty');
      return input;
    }
    if (!Array.isArray(input) || input.length === 0) throw new InputError('invalid_request', `input[${index}]`, 'an input must be a non-empty string or array of token ids');
    input.forEach((token, position) => {
      if (!Number.isInteger(token) || token < 0 || token >= vocabulary) {
        throw new InputError('invalid_request', `input[${index}][${position}]`, `token id ${String(token)} is not in the model's vocabulary (0 to ${vocabulary - 1})`);
      }
    });
    return [...input] as Token[];
  });
}

export async function embed(send: (message: RunnerMessage) => void, contexts: EmbeddingContexts, model: LlamaModel,
  message: EmbedMessage, isCancelled: () => boolean): Promise<boolean> {
  const { requestId } = message;
  try {
    const inputs = resolveInputs(model, message);
    const size = model.embeddingVectorSize;
    const dimensions = message.dimensions ?? size;
    if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > size) {
      throw new InputError('invalid_request', 'dimensions', `dimensions must be 1 to ${size} for this model`);
    }
    // An input far longer than the context is refused before it reaches the tokenizer, which it
    // would hold for minutes (prompt.ts).
    inputs.forEach((input, index) => {
      const atLeast = typeof input === 'string' ? tokensAtLeast(model, input) : 0;
      if (atLeast > model.trainContextSize) {
        throw new InputError('context_length_exceeded', `input[${index}]`,
          `input[${index}] has at least ${atLeast} tokens; the model's context is ${model.trainContextSize}`);
      }
    });
    // Measure every input first: a request either fits whole or is refused before any work.
    const counts = await contexts.use(model, 1, (probe) => inputs.map((input, index) => {
      const count = probe.calculateInputLength(input);
      if (count > model.trainContextSize) {
        throw new InputError('context_length_exceeded', `input[${index}]`,
          `input[${index}] has ${count} tokens; the model's context is ${model.trainContextSize}`);
      }
      return count;
    }));
    const embeddings = await contexts.use(model, Math.max(...counts), async (context) => {
      const vectors: number[][] = [];
      for (const [index, input] of inputs.entries()) {
        if (isCancelled()) return null;
        const { vector } = await context.getEmbeddingFor(input);
        // A broken file can give no vector, one of NaNs, or one of zeros (cosine similarity with
        // it is NaN): an error, never a 200 with it.
        if (vector.length !== size || !vector.every(Number.isFinite)) {
          throw new Error(`the model gave no usable embedding for input[${index}] (${vector.length} values where it has ${size}, `
            + `${vector.filter((value) => !Number.isFinite(value)).length} of them not finite numbers)`);
        }
        const normalized = normalize(vector, dimensions);
        if (!normalized) throw new Error(`the model gave no usable embedding for input[${index}] (its first ${dimensions} values are all 0 or too large to normalise)`);
        vectors.push(normalized);
      }
      return vectors;
    });
    if (!embeddings) return false;
    send({ type: 'embedded', requestId, embeddings, promptTokens: counts, pooling: poolingOf(model) });
  } catch (error) {
    if (error instanceof InputError) send({ type: 'error', requestId, code: error.code, message: error.message, param: error.param });
    else send({ type: 'error', requestId, code: 'engine_error', message: (error as Error).message });
  }
  return true;
}
