/**
 * LMSP 12: LMSP_DEBUG_TOKEN_DELAY_MS makes each generated token take at least this long, the
 * first one included, so that tests and demonstrations see a measurable time to first token.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sampling, withEngine } from '../helpers/engine.js';

const DELAY_MS = 250;

describe('debugging delays (LMSP 12)', () => {
  test('each token, the first included, comes at least the token delay after the one before', { timeout: 120_000 }, () =>
    withEngine({ tokenDelayMs: DELAY_MS }, async ({ engine, tiny }) => {
      const lease = engine.acquire(tiny)!;
      const signal = new AbortController().signal;
      try {
        await lease.load(signal);
        const times = [performance.now()];
        await lease.generate({ taskId: 'task_delays', resumeTokens: [], messages: [{ role: 'user', content: 'x' }], sampling: sampling(1, 3) }, {
          onPrompt: () => undefined,
          onOutput: (units) => {
            for (const _unit of units) times.push(performance.now());
          },
          onToolCalls: () => undefined,
        }, signal);
        assert.equal(times.length, 4, 'three tokens, one unit each');
        for (let i = 1; i < times.length; i++) {
          const gap = times[i]! - times[i - 1]!;
          assert.ok(gap >= DELAY_MS - 10, `token ${i} came ${gap.toFixed(0)} ms after ${i === 1 ? 'the generation started' : 'the one before'}`);
        }
      } finally {
        lease.release();
      }
    }));
});
