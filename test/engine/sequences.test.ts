/**
 * `--parallel-mode sequences`: the slots of a model are sequences of one context in one runner
 * process. A cancel stops one generation without disturbing the others or their runner, and a
 * crash of the runner interrupts them all, each resuming from its committed tokens. (Whether a
 * resume is exact is checked with one generation at a time, by the crash tests run in this mode:
 * batched with others, a sequence's floats depend on the batch, see docs/operations.md.)
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GenerationCancelled, type GenerateRequest, type OutputUnit } from '../../src/engine/engine.js';
import { runGeneration, sampling, withEngine } from '../helpers/engine.js';
import { childPids, waitFor } from '../helpers/service.js';

const TOKENS = 120;

function request(seed: number, maxOutputTokens = TOKENS): Omit<GenerateRequest, 'taskId' | 'resumeTokens'> {
  return { messages: [{ role: 'user', content: `Stream number ${seed}, tell a story.` }], sampling: sampling(seed, maxOutputTokens) };
}

describe('slots as sequences of one context', { skip: process.platform !== 'linux' && 'counts runner processes in /proc' }, () => {
  test('three concurrent streams run in one runner; cancelling one leaves the others and the runner going', { timeout: 180_000 }, () =>
    withEngine({ slots: 3, parallelMode: 'sequences', tokenDelayMs: 5 }, async ({ engine, tiny }) => {
      const cancel = new AbortController();
      const runners = new Set<number>();
      const first = runGeneration(engine, tiny, request(11), {
        onUnit: () => {
          for (const pid of childPids(process.pid)) runners.add(pid);
        },
      });
      const cancelled = runGeneration(engine, tiny, request(12, 1000), {
        signal: cancel.signal,
        onUnit: (_unit, all) => {
          if (all.flatMap((unit) => unit.tokens).length >= 20) cancel.abort();
        },
      });
      const third = runGeneration(engine, tiny, request(13));
      // Every slot is taken: a fourth generation waits.
      assert.equal(engine.acquire(tiny), null);
      await assert.rejects(cancelled, GenerationCancelled);
      const [a, c] = await Promise.all([first, third]);
      assert.equal(runners.size, 1, 'one runner process serves the three slots');
      assert.equal(a.finishReason, 'max_output_tokens');
      assert.equal(c.finishReason, 'max_output_tokens');
      assert.equal(a.tokens.length, TOKENS);
      assert.equal(c.tokens.length, TOKENS);
      assert.deepEqual(childPids(process.pid), [...runners], 'the cancel did not end the shared runner');
      // The cancelled sequence is free again: three more generations fit at once.
      const again = await Promise.all([31, 32, 33].map((seed) => runGeneration(engine, tiny, request(seed, 10))));
      assert.deepEqual(again.map((result) => result.tokens.length), [10, 10, 10]);
      assert.deepEqual(childPids(process.pid), [...runners]);
    }));

  test('leases that start together wait on one load of their runner: the model is loaded, and counted, once', { timeout: 120_000 }, () => {
    const loads: string[] = [];
    return withEngine({ slots: 3, parallelMode: 'sequences', onModelLoad: (model, result) => loads.push(`${model} ${result}`) }, async ({ engine, tiny }) => {
      const leases = [engine.acquire(tiny)!, engine.acquire(tiny)!, engine.acquire(tiny)!];
      assert.ok(leases.every((lease) => lease.needsLoad), 'each lease was taken before the model was loaded');
      const signal = new AbortController().signal;
      await Promise.all(leases.map((lease) => lease.load(signal)));
      assert.deepEqual(loads, ['lmsp-tiny loaded'], 'lmsp_model_loads_total counts loads, not the leases waiting on one');
      for (const lease of leases) lease.release();
      const again = engine.acquire(tiny)!;
      assert.equal(again.needsLoad, false);
      again.release();
    });
  });

  test('a load cancelled after its runner read the model leaves it loaded, and is counted as loaded', { timeout: 120_000 }, () => {
    const loads: string[] = [];
    // The runner loads at once; the pool then waits out the rest of the debug delay, which the
    // cancel interrupts with the model already in the runner.
    return withEngine({ parallelMode: 'processes', loadDelayMs: 60_000, onModelLoad: (model, result) => loads.push(`${model} ${result}`) }, async ({ engine, tiny }) => {
      const lease = engine.acquire(tiny)!;
      const abort = new AbortController();
      const loading = lease.load(abort.signal).then(() => assert.fail('the load was cancelled'), (error: unknown) => error);
      await waitFor(() => engine.loadedModelIds().has('lmsp-tiny') || null, { what: 'the runner to read the model', timeoutMs: 60_000 });
      abort.abort();
      assert.ok(await loading instanceof GenerationCancelled);
      lease.release();
      assert.deepEqual(loads, ['lmsp-tiny loaded'], 'the model stays loaded, so the load counts as one');
      const next = engine.acquire(tiny)!;
      assert.equal(next.needsLoad, false, 'the next generation uses it');
      next.release();
    });
  });

  test('generations larger than the shared sequences so far run beside them, or grow them when idle', { timeout: 180_000 }, () =>
    withEngine({ slots: 2, parallelMode: 'sequences' }, async ({ engine, tiny }) => {
      // The first generation sizes the shared context for a few hundred tokens.
      assert.equal((await runGeneration(engine, tiny, request(41, 20))).tokens.length, 20);
      // A larger one while another sequence is in use: a context of its own, same runner.
      const [small, large] = await Promise.all([runGeneration(engine, tiny, request(42, 200)), runGeneration(engine, tiny, request(43, 1200))]);
      assert.equal(small.tokens.length, 200);
      assert.equal(large.tokens.length, 1200);
      // Alone, a larger one grows the shared context; one beyond its limit still runs.
      assert.equal((await runGeneration(engine, tiny, request(44, 1500))).tokens.length, 1500);
      assert.equal((await runGeneration(engine, tiny, request(45, 3000))).tokens.length, 3000);
      assert.equal(childPids(process.pid).length, 1);
    }));

  test('a crash of the runner interrupts every sequence; each resumes from its committed tokens', { timeout: 180_000 }, () =>
    withEngine({ slots: 2, parallelMode: 'sequences', tokenDelayMs: 5 }, async ({ engine, tiny }) => {
      const committed: OutputUnit[][] = [[], []];
      let killed = false;
      const kill = () => {
        if (killed || committed.some((units) => units.flatMap((unit) => unit.tokens).length < TOKENS / 3)) return;
        killed = true;
        for (const pid of childPids(process.pid)) process.kill(pid, 'SIGKILL');
      };
      const interrupted = [21, 22].map((seed, index) => runGeneration(engine, tiny, { ...request(seed), taskId: `task_crash_${seed}` }, {
        onUnit: (unit) => {
          committed[index]!.push(unit);
          kill();
        },
      }));
      for (const run of interrupted) await assert.rejects(run);
      assert.ok(killed);
      const resumed = await Promise.all([21, 22].map((seed, index) => runGeneration(engine, tiny, {
        ...request(seed),
        taskId: `task_crash_${seed}`,
        resumeTokens: committed[index]!.flatMap((unit) => unit.tokens),
      })));
      for (const index of [0, 1]) {
        const before = committed[index]!.flatMap((unit) => unit.tokens).length;
        assert.ok(before >= TOKENS / 3 && before < TOKENS);
        assert.equal(resumed[index]!.finishReason, 'max_output_tokens');
        assert.equal(before + resumed[index]!.tokens.length, TOKENS, 'the resume continues after the committed tokens');
      }
    }));
});
