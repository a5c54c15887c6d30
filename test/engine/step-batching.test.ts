/**
 * `--parallel-mode sequences` exists to decode the slots of a model together: one batch, one pass
 * over the weights, for every sequence generating at once. In the runner each batch held about
 * one token: every sequence does some work of its own between two steps (detokenizing, sending
 * its output), and node-llama-cpp's dispatch loop decodes whatever is queued when the batch
 * before ends. The step batcher (src/engine/sequences.ts) starts the steps of the generating
 * sequences together. Measured here in-process on the built-in model, with that work between
 * steps, by the batches node-llama-cpp decodes.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { getLlama, LlamaLogLevel, type LlamaContext, type LlamaModel, type Token } from 'node-llama-cpp';
import { writeGgufFile } from '../../src/engine/gguf-writer.js';
import { renderPrompt } from '../../src/engine/prompt.js';
import { sharedContext, STEP_WAIT_MS, type BatchingStats, type SequenceLease } from '../../src/engine/sequences.js';
import { sleep } from '../../src/time.js';
import { buildSyntheticModel, LMSP_TINY } from '../../src/engine/synthetic-model.js';
import { makeDataDir } from '../helpers/data-dir.js';

const STEPS = 60;

/**
 * Counts the batches a context decodes, at its native `decodeBatch` (internal to node-llama-cpp,
 * whose version is pinned): the public API says nothing of how evaluations were batched.
 */
function countDecodes(context: LlamaContext): { batches: number } {
  const holder = context as unknown as { _ctx: Record<string | symbol, unknown> };
  const native = holder._ctx;
  const counter = { batches: 0 };
  // The native object's methods are read-only: the context gets a view of it that counts.
  holder._ctx = new Proxy(native, {
    get(target, property) {
      const value = Reflect.get(target, property) as unknown;
      if (typeof value !== 'function') return value;
      if (property === 'decodeBatch') counter.batches += 1;
      return (value as (...args: unknown[]) => unknown).bind(target);
    },
  });
  return counter;
}

/**
 * A generation as the runner runs one: its prompt, then one step a token through the lease, with
 * a little work of its own between steps (a few turns of the event loop, different per sequence).
 */
async function generate(model: LlamaModel, lease: SequenceLease, seed: number, steps: number,
  between: (generated: number) => Promise<void> = async () => {}): Promise<Token[]> {
  const prompt = renderPrompt(model, [{ role: 'user', content: `Stream ${seed}` }]).tokens;
  const sample = { temperature: 1, topP: 1, topK: 0, minP: 0, seed };
  const first = await lease.sequence.controlledEvaluate(prompt.map((token, index) =>
    (index === prompt.length - 1 ? [token, { generateNext: { token: true, options: sample } }] as const : token)) as Parameters<typeof lease.sequence.controlledEvaluate>[0]);
  const tokens: Token[] = [first.at(-1)!.next!.token!];
  while (tokens.length < steps) {
    const results = await lease.step(() => lease.sequence.controlledEvaluate([[tokens.at(-1)!, { generateNext: { token: true, options: { ...sample, seed: seed + tokens.length } } }]]));
    tokens.push(results[0]!.next!.token!);
    for (let turn = 0; turn < (seed + tokens.length) % 3; turn++) await new Promise(setImmediate);
    await between(tokens.length);
  }
  return tokens;
}

describe('the steps of sequences generating at once are decoded as one batch', () => {
  let model: LlamaModel;

  before(async () => {
    const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
    const path = join(makeDataDir('step-batching'), 'tiny.gguf');
    writeGgufFile(path, buildSyntheticModel(LMSP_TINY));
    model = await llama.loadModel({ modelPath: path });
  });

  after(() => model?.dispose());

  test('four sequences stepping together share their batches', { timeout: 120_000 }, async () => {
    const stats: BatchingStats = { steps: 0, batches: 0, waitedOut: 0 };
    const source = sharedContext(4, 1, stats);
    let decodes: { batches: number } | null = null;
    try {
      const outputs = await Promise.all([1, 2, 3, 4].map(async (seed) => {
        const lease = await source.acquire(model, 256);
        decodes ??= countDecodes(lease.sequence.context);
        try {
          return await generate(model, lease, seed, STEPS);
        } finally {
          await lease.release();
        }
      }));
      assert.deepEqual(outputs.map((tokens) => tokens.length), [STEPS, STEPS, STEPS, STEPS]);
      assert.equal(stats.steps, 4 * (STEPS - 1));
      // 236 steps and the prompts: about 60 batches when the steps line up, over 200 when not.
      const { batches } = decodes!;
      assert.ok(stats.steps / batches >= 3, `${stats.steps} steps decoded in ${batches} batches (${stats.waitedOut} of ${stats.batches} groups started by the deadline)`);
    } finally {
      await source.dispose();
    }
  });

  test('a released sequence is not waited for, and one generating alone never waits', { timeout: 120_000 }, async () => {
    const stats: BatchingStats = { steps: 0, batches: 0, waitedOut: 0 };
    const source = sharedContext(2, 1, stats);
    try {
      const [short, long] = await Promise.all([5, STEPS].map(async (steps, index) => {
        const lease = await source.acquire(model, 256);
        try {
          return await generate(model, lease, 10 + index, steps);
        } finally {
          await lease.release();
        }
      }));
      assert.equal(short!.length, 5);
      assert.equal(long!.length, STEPS);
      // Had the batcher kept waiting for the released sequence, each of the long one's remaining
      // ~55 steps would have been dispatched by the deadline.
      assert.ok(stats.waitedOut <= 3, `${stats.waitedOut} of ${stats.batches} batches waited out the deadline`);
    } finally {
      await source.dispose();
    }
  });

  test('a sequence saving its state is not waited for', { timeout: 120_000 }, async () => {
    const stats: BatchingStats = { steps: 0, batches: 0, waitedOut: 0 };
    const source = sharedContext(2, 1, stats);
    let saves = 0;
    try {
      await Promise.all([0, 1].map(async (index) => {
        const lease = await source.acquire(model, 256);
        try {
          // Every 10 tokens the first sequence "saves its state" for longer than a step waits.
          return await generate(model, lease, 20 + index, STEPS, async (generated) => {
            if (index === 1 || generated % 10 !== 0) return;
            saves += 1;
            await lease.aside(() => sleep(STEP_WAIT_MS * 2));
          });
        } finally {
          await lease.release();
        }
      }));
      assert.ok(saves >= 5);
      assert.ok(stats.waitedOut <= 1, `${stats.waitedOut} of ${stats.batches} groups waited for a sequence saving its state`);
    } finally {
      await source.dispose();
    }
  });

  test('sequences of a shared context still generate what their seeds ask for', { timeout: 120_000 }, async () => {
    // Alone in the shared context, a sequence's tokens are those of the same steps in a context of its own.
    const run = async (sequences: number) => {
      const source = sharedContext(sequences, 1);
      try {
        const lease = await source.acquire(model, 256);
        try {
          return await generate(model, lease, 7, 30);
        } finally {
          await lease.release();
        }
      } finally {
        await source.dispose();
      }
    };
    assert.deepEqual(await run(1), await run(3));
  });
});
