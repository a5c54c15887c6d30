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
/** How long a step in a shared context waits for the steps of the other generating sequences. */
export const STEP_WAIT_MS = 20;

export interface SequenceLease {
  sequence: LlamaContextSequence;
  /**
   * Runs one decoding step of the generation (evaluate its last token and sample the next). In a
   * shared context the steps of the sequences generating at once are decoded as one batch.
   */
  step<T>(evaluate: () => Promise<T>): Promise<T>;
  /**
   * Runs work of the generation between two steps (saving its state) during which the other
   * sequences' steps do not wait for this one.
   */
  aside<T>(work: () => Promise<T>): Promise<T>;
  release(): Promise<void>;
}

export interface SequenceSource {
  /** A sequence that can hold `tokens` tokens (prompt and output). */
  acquire(model: LlamaModel, tokens: number): Promise<SequenceLease>;
  /** Frees the shared context (before its model is unloaded). */
  dispose(): Promise<void>;
}

/** What the step batchers of a shared context did, since it was first created. */
export interface BatchingStats {
  /** Decoding steps taken through `SequenceLease.step`. */
  steps: number;
  /** Groups of steps started together. */
  batches: number;
  /** Of those, the ones started when `STEP_WAIT_MS` ran out instead of when every sequence had come. */
  waitedOut: number;
}

/**
 * Lines up the decoding steps of the sequences of one context, so that node-llama-cpp decodes
 * them as one batch: one pass over the weights for all of them, which is what a shared context is
 * for. Left alone they did not line up: node-llama-cpp hands each sequence its sampled token as
 * soon as that one is sampled, and its dispatch loop decodes whatever is queued when the batch
 * before ends, so a sequence that got its token first was decoded again alone, and the others
 * after it: 1.0 to 1.2 tokens a batch with 4 sequences generating, as slow as one (BENCHMARKS.md).
 * Here a step waits until every generating sequence has come to its step, then all start
 * together; one that does not come within `STEP_WAIT_MS` is not waited for, nor one that is
 * saving its state (`aside`). A prompt, or a sequence generating alone, never waits.
 */
export class StepBatcher {
  /** Sequences that have taken a step and not been released: those a step waits for. */
  private generating = 0;
  /** The steps that have come and wait for the others. */
  private arrived: Array<() => void> = [];
  private timer: NodeJS.Timeout | null = null;
  private starting: NodeJS.Immediate | null = null;

  constructor(private readonly stats: BatchingStats = { steps: 0, batches: 0, waitedOut: 0 }) {}

  async step<T>(first: boolean, evaluate: () => Promise<T>): Promise<T> {
    this.stats.steps += 1;
    if (first) this.generating += 1;
    await new Promise<void>((resolve) => {
      this.arrived.push(resolve);
      this.startWhenComplete();
    });
    return evaluate();
  }

  /** A sequence that has taken steps is released: the others no longer wait for it. */
  leave(): void {
    this.generating -= 1;
    this.startWhenComplete();
  }

  /** Work of a generating sequence that the others' steps should not wait for. */
  async aside<T>(work: () => Promise<T>): Promise<T> {
    this.leave();
    try {
      return await work();
    } finally {
      this.generating += 1;
    }
  }

  private startWhenComplete(): void {
    if (this.arrived.length === 0) return;
    // Started on the next turn: by then the batch that handed out these tokens has ended, and
    // node-llama-cpp's dispatch loop with it, so all their decodes are queued for one new batch.
    if (this.generating <= 1) this.start();
    else if (this.arrived.length >= this.generating) this.startOnNextTurn();
    else if (!this.starting) this.timer ??= setTimeout(this.waitedOut, STEP_WAIT_MS);
  }

  private readonly waitedOut = (): void => {
    this.stats.waitedOut += 1;
    this.start();
  };

  private startOnNextTurn(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.starting ??= setImmediate(this.start);
  }

  /** Lets every waiting step go in the same turn, so their decodes are queued for one batch. */
  private readonly start = (): void => {
    if (this.timer) clearTimeout(this.timer);
    if (this.starting) clearImmediate(this.starting);
    this.timer = null;
    this.starting = null;
    const arrived = this.arrived;
    this.arrived = [];
    this.stats.batches += 1;
    for (const go of arrived) go();
  };
}

/** A context of its own for each generation, sized for it. */
async function ownContext(model: LlamaModel, tokens: number, threads: number): Promise<SequenceLease> {
  const contextSize = Math.min(model.trainContextSize, Math.ceil((tokens + 1) / 256) * 256);
  const context = await model.createContext({ contextSize, batchSize: PROMPT_CHUNK, sequences: 1, threads });
  return { sequence: context.getSequence(), step: (evaluate) => evaluate(), aside: (work) => work(), release: () => context.dispose() };
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
export function sharedContext(sequences: number, threads: number, stats?: BatchingStats): SequenceSource {
  let shared: { model: LlamaModel; size: number; context: Promise<LlamaContext>; batcher: StepBatcher } | null = null;
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
        const batcher = new StepBatcher(stats);
        const created = { model, size, batcher, context: model.createContext({ contextSize: size, batchSize: PROMPT_CHUNK, sequences, threads }) };
        created.context.catch(() => {
          if (shared === created) shared = null;
        });
        shared = created;
      }
      free -= 1;
      const { batcher } = shared;
      let sequence: LlamaContextSequence;
      try {
        sequence = (await shared.context).getSequence();
      } catch (error) {
        free += 1;
        wake();
        throw error;
      }
      let released = false;
      let stepped = false;
      return {
        sequence,
        step(evaluate) {
          const first = !stepped;
          stepped = true;
          return batcher.step(first, evaluate);
        },
        aside(work) {
          return stepped && !released ? batcher.aside(work) : work();
        },
        async release() {
          if (released) return;
          released = true;
          if (stepped) batcher.leave();
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
