import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EngineInputError, GenerationCancelled } from '../../src/engine/engine.js';
import { LMSP_TINY, SYNTHETIC_SPACE_TOKEN_ID, syntheticByteTokenId } from '../../src/engine/synthetic-model.js';
import { runGeneration, sampling, withEngine } from '../helpers/engine.js';
import { childPids, waitFor } from '../helpers/service.js';

function norm(vector: readonly number[]): number {
  return Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
}

async function rejectsWith(promise: Promise<unknown>, code: string, param: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof EngineInputError, String(error));
    assert.equal(error.code, code);
    assert.equal(error.param, param);
    return true;
  });
}

describe('embeddings (LMSP 14)', () => {
  test('vectors are L2-normalised, bit-identical for the same input, different for different inputs, the same in a batch as alone', { timeout: 60_000 }, () =>
    withEngine({}, async ({ engine, tiny }) => {
      const inputs = ['The cat sat.', 'A dog ran far away.', 'The cat sat.'];
      const batch = await engine.embed(tiny, { inputs });
      assert.equal(batch.pooling, 'last', 'lmsp-tiny has no pooling_type: the last token, as llama.cpp and node-llama-cpp do for decoders');
      assert.equal(batch.embeddings.length, 3);
      for (const vector of batch.embeddings) {
        assert.equal(vector.length, 64);
        assert.ok(Math.abs(norm(vector) - 1) < 1e-12);
      }
      assert.deepEqual(batch.embeddings[0], batch.embeddings[2], 'same input, same bits');
      assert.notDeepEqual(batch.embeddings[0], batch.embeddings[1]);
      for (const [index, input] of inputs.entries()) {
        const alone = await engine.embed(tiny, { inputs: [input] });
        assert.deepEqual(alone.embeddings[0], batch.embeddings[index], `input ${index} alone`);
        assert.equal(alone.promptTokens[0], batch.promptTokens[index]);
      }
      // "The cat sat." is BOS, ▁, then one byte token per character (spaces as ▁).
      assert.deepEqual(batch.promptTokens, [2 + 'The cat sat.'.length, 2 + 'A dog ran far away.'.length, 2 + 'The cat sat.'.length]);
    }));

  test('token-id inputs embed as the text they spell; dimensions truncate and renormalise', { timeout: 60_000 }, () =>
    withEngine({}, async ({ engine, tiny }) => {
      const text = 'hi there';
      const ids = [SYNTHETIC_SPACE_TOKEN_ID, ...[...text].map((char) => (char === ' ' ? SYNTHETIC_SPACE_TOKEN_ID : syntheticByteTokenId(char.charCodeAt(0))))];
      const [fromText, fromIds] = [await engine.embed(tiny, { inputs: [text] }), await engine.embed(tiny, { inputs: [ids] })];
      assert.deepEqual(fromIds.embeddings[0], fromText.embeddings[0]);
      assert.equal(fromIds.promptTokens[0], ids.length + 1, 'BOS added');
      const short = await engine.embed(tiny, { inputs: [text], dimensions: 8 });
      const vector = short.embeddings[0]!;
      assert.equal(vector.length, 8);
      assert.ok(Math.abs(norm(vector) - 1) < 1e-12);
      const prefix = fromText.embeddings[0]!.slice(0, 8);
      prefix.forEach((value, index) => assert.ok(Math.abs(value / norm(prefix) - vector[index]!) < 1e-12));
    }));

  test('bad inputs are refused naming the input: too long for the context, unknown token ids, empty, too many, bad dimensions', { timeout: 60_000 }, () =>
    withEngine({}, async ({ engine, tiny }) => {
      await rejectsWith(engine.embed(tiny, { inputs: ['fine', 'x'.repeat(16384)] }), 'context_length_exceeded', 'input[1]');
      await rejectsWith(engine.embed(tiny, { inputs: [[5, 6], [259, 100_000]] }), 'invalid_request', 'input[1][1]');
      await rejectsWith(engine.embed(tiny, { inputs: [[-1]] }), 'invalid_request', 'input[0][0]');
      await rejectsWith(engine.embed(tiny, { inputs: ['a', ''] }), 'invalid_request', 'input[1]');
      await rejectsWith(engine.embed(tiny, { inputs: [] }), 'invalid_request', 'input');
      await rejectsWith(engine.embed(tiny, { inputs: Array.from({ length: 2049 }, () => 'a') }), 'invalid_request', 'input');
      await rejectsWith(engine.embed(tiny, { inputs: ['a'], dimensions: 65 }), 'invalid_request', 'dimensions');
      await rejectsWith(engine.embed(tiny, { inputs: ['a'], dimensions: 0 }), 'invalid_request', 'dimensions');
      const ok = await engine.embed(tiny, { inputs: ['x'.repeat(16380)] });
      assert.equal(ok.promptTokens[0], 16382, 'an input that fits the context is embedded');
    }));

  test('concurrent requests on one runner: one that needs a larger context does not dispose the context another is using', { timeout: 120_000 }, () =>
    withEngine({}, async ({ engine, tiny }) => {
      const many = Array.from({ length: 400 }, (_, index) => `short text ${index}`);
      const alone = await engine.embed(tiny, { inputs: many });
      // While the batch computes on a small context, longer inputs make the runner grow it twice.
      const batch = engine.embed(tiny, { inputs: many });
      await new Promise((resolve) => setTimeout(resolve, 50));
      const longer = await engine.embed(tiny, { inputs: ['y'.repeat(1200)] });
      const longest = await engine.embed(tiny, { inputs: ['z'.repeat(3000)] });
      assert.equal((await batch).embeddings.length, many.length);
      assert.deepEqual((await batch).embeddings, alone.embeddings, 'the same bits as computed alone');
      assert.equal(longer.promptTokens[0], 1202);
      assert.equal(longest.promptTokens[0], 3002);
    }));

  test('an embedding is answered beside a running generation of the same model, on its runner, without changing it', { timeout: 120_000 }, () =>
    withEngine({ tokenDelayMs: 40 }, async ({ engine, tiny }) => {
      const request = { messages: [{ role: 'user' as const, content: 'Go on.' }], sampling: sampling(3, 40) };
      const alone = await runGeneration(engine, tiny, request);
      const before = await engine.embed(tiny, { inputs: ['beside'] });
      let units = 0;
      let finished = false;
      const generation = runGeneration(engine, tiny, request, { onUnit: () => { units += 1; } }).finally(() => { finished = true; });
      await waitFor(() => units >= 2, { what: 'the generation to run' });
      assert.equal(engine.acquire(tiny), null, 'the only slot is busy');
      const during = await engine.embed(tiny, { inputs: ['beside'] });
      assert.equal(finished, false, 'answered while the generation still runs');
      assert.deepEqual(during.embeddings, before.embeddings);
      assert.equal(childPids(process.pid).length, 1, 'on the runner that holds the model');
      const result = await generation;
      assert.equal(result.text, alone.text, 'the generation is unchanged');
    }));

  test('a model no runner holds is loaded on a free slot, and stays loaded for generation', { timeout: 60_000 }, () =>
    withEngine({}, async ({ engine, tiny }) => {
      assert.deepEqual([...engine.loadedModelIds()], []);
      await engine.embed(tiny, { inputs: ['load me'] });
      assert.deepEqual([...engine.loadedModelIds()], ['lmsp-tiny']);
      const lease = engine.acquire(tiny)!;
      assert.equal(lease.needsLoad, false, 'the generation shares the load');
      lease.release();
    }));

  test('with every slot busy on another model, an embedding waits for a slot, then runs; a cancelled one stops', { timeout: 120_000 }, () =>
    withEngine({ tokenDelayMs: 20 }, async ({ engine, tiny, addModel }) => {
      const other = addModel({ ...LMSP_TINY, name: 'other', seed: 7 });
      const busy = engine.acquire(other)!;
      await busy.load(new AbortController().signal);
      let settled = false;
      const waiting = engine.embed(tiny, { inputs: ['wait'] }).finally(() => { settled = true; });
      const abort = new AbortController();
      const cancelled = engine.embed(tiny, { inputs: ['never'] }, abort.signal);
      abort.abort();
      await assert.rejects(cancelled, GenerationCancelled);
      let units = 0;
      const generation = busy.generate({ taskId: 'task_busy', messages: [{ role: 'user', content: 'x' }], sampling: sampling(1, 30), resumeTokens: [] },
        { onPrompt: () => {}, onOutput: (batch) => { units += batch.length; } }, new AbortController().signal);
      await waitFor(() => units >= 10, { what: 'the other model to generate' });
      assert.equal(settled, false, 'no slot while the other model generates');
      await generation;
      busy.release();
      const result = await waiting;
      assert.equal(result.embeddings.length, 1);
      assert.deepEqual([...engine.loadedModelIds()], ['lmsp-tiny'], 'max_loaded_models 1: the idle model made room');
    }));
});
