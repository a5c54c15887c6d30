/**
 * `--parallel-mode sequences`: the slots of a model are sequences of one context in one runner
 * process. Concurrent generations there end as each would alone (same seed, same tokens), a
 * cancel stops one without disturbing the others, and a crash of the runner loses none of them:
 * each resumes from its committed tokens, exactly.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GenerationCancelled, type GenerateRequest, type OutputUnit } from '../../src/engine/engine.js';
import { runGeneration, sampling, withEngine } from '../helpers/engine.js';
import { childPids } from '../helpers/service.js';

const TOKENS = 120;

function request(seed: number, maxOutputTokens = TOKENS): Omit<GenerateRequest, 'taskId' | 'resumeTokens'> {
  return { messages: [{ role: 'user', content: `Stream number ${seed}, tell a story.` }], sampling: sampling(seed, maxOutputTokens) };
}

describe('slots as sequences of one context', { skip: process.platform !== 'linux' && 'counts runner processes in /proc' }, () => {
  test('three concurrent streams run in one runner; cancelling one leaves the others as they are alone', { timeout: 180_000 }, () =>
    withEngine({ slots: 3, parallelMode: 'sequences', tokenDelayMs: 5 }, async ({ engine, tiny }) => {
      const cancel = new AbortController();
      let runners = 0;
      const first = runGeneration(engine, tiny, request(11), {
        onUnit: () => {
          runners = Math.max(runners, childPids(process.pid).length);
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
      assert.equal(runners, 1, 'one runner process serves the three slots');
      assert.equal(a.finishReason, 'max_output_tokens');
      assert.equal(c.finishReason, 'max_output_tokens');
      assert.equal(a.tokens.length, TOKENS);
      assert.equal(c.tokens.length, TOKENS);

      const aloneA = await runGeneration(engine, tiny, request(11));
      const aloneC = await runGeneration(engine, tiny, request(13));
      assert.deepEqual(a.tokens, aloneA.tokens);
      assert.deepEqual(c.tokens, aloneC.tokens);
      assert.equal(a.text, aloneA.text);
      assert.equal(childPids(process.pid).length, 1, 'the cancel did not end the shared runner');
    }));

  test('a crash of the runner interrupts every sequence; each resumes exactly from its committed tokens', { timeout: 180_000 }, () =>
    withEngine({ slots: 2, parallelMode: 'sequences', tokenDelayMs: 5 }, async ({ engine, tiny }) => {
      const expected = await Promise.all([runGeneration(engine, tiny, request(21)), runGeneration(engine, tiny, request(22))]);
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
        const whole = [...committed[index]!.flatMap((unit) => unit.tokens), ...resumed[index]!.tokens];
        assert.deepEqual(whole, expected[index]!.tokens);
        assert.equal(committed[index]!.map((unit) => unit.text).join('') + resumed[index]!.text, expected[index]!.text);
      }
    }));
});
