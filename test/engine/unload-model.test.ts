/**
 * LMSP 5: a model found not to match its digest (or unregistered) is let go by every runner that
 * holds it. One still generating with it finishes that generation, takes no new work with it, and
 * unloads it as soon as it is idle, not at the end of its keep-alive.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { EngineLease } from '../../src/engine/engine.js';
import { runGeneration, sampling, withEngine } from '../helpers/engine.js';

describe('unloading a model a runner is busy with (LMSP 5)', () => {
  for (const parallelMode of ['processes', 'sequences'] as const) {
    test(`${parallelMode}: the runner finishes its generation, is given nothing new with the model, and unloads it once idle`, { timeout: 60_000 }, () =>
      withEngine({ slots: 2, keepAliveMs: 60_000, tokenDelayMs: 20, parallelMode }, async ({ engine, tiny }) => {
        let asked = false;
        let other: EngineLease | null = null;
        const result = await runGeneration(engine, tiny, { messages: [{ role: 'user', content: 'hi' }], sampling: sampling(3, 12) }, {
          onUnit: () => {
            if (asked) return;
            asked = true;
            engine.unloadModel(tiny);
            assert.ok(engine.isLoaded(tiny), 'still held by the generation running on it');
            // A second generation of the same model does not join the runner that is letting it go.
            other = engine.acquire(tiny);
            assert.ok(other, 'the second slot is free');
            assert.equal(other.needsLoad, true, 'a runner that loads the model anew, not the retiring one');
          },
        });
        assert.equal(result.finishReason, 'max_output_tokens');
        assert.equal(result.tokens.length, 12, 'the generation under way ran to its end');
        assert.deepEqual([...engine.loadedModelIds()], [], 'unloaded when its generation ended, not after the keep-alive');
        (other as EngineLease | null)?.release();
      }));
  }

  test('an idle runner holding the model unloads it at once, and the model loads again on its next use', { timeout: 60_000 }, () =>
    withEngine({ slots: 1, keepAliveMs: 60_000 }, async ({ engine, tiny }) => {
      await runGeneration(engine, tiny, { messages: [{ role: 'user', content: 'hi' }], sampling: sampling(1, 2) });
      assert.ok(engine.isLoaded(tiny));
      engine.unloadModel(tiny);
      assert.equal(engine.isLoaded(tiny), false);
      const lease = engine.acquire(tiny);
      assert.ok(lease);
      assert.equal(lease.needsLoad, true);
      lease.release();
    }));
});
