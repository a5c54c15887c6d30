/**
 * Where a generation in the runner gets its sequence. With `--parallel-mode processes` each
 * generation creates a context of its own, sized for its prompt and `max_output_tokens`. With
 * `--parallel-mode sequences` the runner holds one context per model with a sequence per slot,
 * and node-llama-cpp batches the evaluations of the sequences that decode at the same time (one
 * copy of the weights, one forward pass for all slots); a generation that does not fit a
 * sequence's share of that context gets a context of its own, as in the other mode.
 */
import type { LlamaContext, LlamaContextSequence, LlamaModel } from 'node-llama-cpp';

/** Prompt chunk size, and the context's batch size: a cancel is checked between chunks. */
export const PROMPT_CHUNK = 512;
/** The context each sequence of the shared context may hold, at most (tokens). */
export const SEQUENCE_CONTEXT = 2048;

export interface SequenceLease {
  sequence: LlamaContextSequence;
  release(): Promise<void>;
}

export interface SequenceSource {
  /** A sequence that can hold `tokens` tokens (prompt and output). */
  acquire(model: LlamaModel, tokens: number): Promise<SequenceLease>;
  /** Frees the shared context (before its model is unloaded). */
  dispose(): Promise<void>;
}

/** A context of its own for each generation, sized for it. */
async function ownContext(model: LlamaModel, tokens: number, threads: number): Promise<SequenceLease> {
  const contextSize = Math.min(model.trainContextSize, Math.ceil((tokens + 1) / 256) * 256);
  const context = await model.createContext({ contextSize, batchSize: PROMPT_CHUNK, sequences: 1, threads });
  return { sequence: context.getSequence(), release: () => context.dispose() };
}

export function contextPerGeneration(threads: number): SequenceSource {
  return { acquire: (model, tokens) => ownContext(model, tokens, threads), dispose: async () => {} };
}

/**
 * One context of `sequences` sequences for the loaded model, created at its first generation,
 * each sequence sized for the largest generation seen so far (as a context of its own would be,
 * so that idle slots do not hold a cache they never use). A generation that needs more while
 * other sequences are in use gets a context of its own; when none is in use the shared context
 * is created again, larger. A generation waits for a free sequence when all are taken (a
 * cancelled generation may still be stopping in one after its slot was given back).
 */
export function sharedContext(sequences: number, threads: number): SequenceSource {
  let shared: { model: LlamaModel; size: number; context: Promise<LlamaContext> } | null = null;
  let free = sequences;
  const waiters: Array<() => void> = [];
  const wake = () => waiters.shift()?.();

  const drop = (): Promise<void> => {
    const current = shared;
    shared = null;
    return current ? current.context.then((context) => context.dispose(), () => undefined) : Promise.resolve();
  };

  return {
    async acquire(model, tokens) {
      const size = Math.min(model.trainContextSize, Math.ceil((tokens + 1) / 256) * 256);
      if (size > Math.min(model.trainContextSize, SEQUENCE_CONTEXT)) return ownContext(model, tokens, threads);
      while (free === 0) await new Promise<void>((resolve) => waiters.push(resolve));
      // From here to the reservation nothing awaits: the checks hold when the sequence is taken.
      if (shared && (shared.model !== model || shared.size < size)) {
        if (shared.model === model && free < sequences) return ownContext(model, tokens, threads);
        void drop();
      }
      if (!shared) {
        const created = { model, size, context: model.createContext({ contextSize: size, batchSize: PROMPT_CHUNK, sequences, threads }) };
        created.context.catch(() => {
          if (shared === created) shared = null;
        });
        shared = created;
      }
      free -= 1;
      let sequence: LlamaContextSequence;
      try {
        sequence = (await shared.context).getSequence();
      } catch (error) {
        free += 1;
        wake();
        throw error;
      }
      let released = false;
      return {
        sequence,
        async release() {
          if (released) return;
          released = true;
          // Disposing gives the sequence id back to the context with its cache cleared.
          await sequence.dispose();
          free += 1;
          wake();
        },
      };
    },
    dispose: drop,
  };
}
