/**
 * LMSP 5: at most `max_loaded_models` models at a time. A model counts from the moment a slot is
 * leased for it, while it still loads: two loads of different models that start together must
 * not both pass the limit.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LMSP_TINY } from '../../src/engine/synthetic-model.js';
import { withEngine } from '../helpers/engine.js';

describe('max_loaded_models holds while loads overlap (LMSP 5)', () => {
  for (const parallelMode of ['processes', 'sequences'] as const) {
    test(`${parallelMode}: a second model waits while the first still loads, and gets the slot once it is released`, { timeout: 60_000 }, () =>
      withEngine({ slots: 2, maxLoadedModels: 1, loadDelayMs: 500, parallelMode }, async ({ engine, tiny, addModel }) => {
        const other = addModel({ ...LMSP_TINY, name: 'other' });
        const first = engine.acquire(tiny)!;
        assert.ok(first.needsLoad);
        const loading = first.load(new AbortController().signal);
        assert.equal(engine.acquire(other), null, 'no slot for a second model while the first loads: one model at a time');
        await loading;
        assert.equal(engine.acquire(other), null, 'nor while the first is loaded and its lease held');
        assert.deepEqual([...engine.loadedModelIds()], ['lmsp-tiny']);
        first.release();
        const second = engine.acquire(other);
        assert.ok(second, 'the idle model is unloaded for the next one');
        await second.load(new AbortController().signal);
        assert.deepEqual([...engine.loadedModelIds()], ['other']);
        second.release();
      }));
  }
});

describe('max_loaded_models above the slots (LMSP 5)', () => {
  test('with one slot, two models stay loaded side by side, idle; a third unloads the least recently used', { timeout: 90_000 }, () =>
    withEngine({ slots: 1, maxLoadedModels: 2, keepAliveMs: 60_000 }, async ({ engine, tiny, addModel }) => {
      const other = addModel({ ...LMSP_TINY, name: 'other' });
      const third = addModel({ ...LMSP_TINY, name: 'third' });
      const use = async (model: typeof tiny) => {
        const lease = engine.acquire(model);
        assert.ok(lease, `a slot for ${model.id}`);
        try {
          assert.equal(engine.acquire(other), null, 'one generation at a time: the slot is taken');
          const loads = lease.needsLoad;
          await lease.load(new AbortController().signal);
          return loads;
        } finally {
          lease.release();
        }
      };
      assert.equal(await use(tiny), true);
      assert.equal(await use(other), true);
      assert.deepEqual([...engine.loadedModelIds()].sort(), ['lmsp-tiny', 'other'], 'both kept: the limit is two models');
      assert.equal(await use(tiny), false, 'lmsp-tiny was still loaded');
      assert.equal(await use(third), true);
      assert.deepEqual([...engine.loadedModelIds()].sort(), ['lmsp-tiny', 'third'], 'other, the least recently used, made room');
    }));
});

describe('a model makes room only for a load that happens (LMSP 5)', () => {
  for (const parallelMode of ['processes', 'sequences'] as const) {
    test(`${parallelMode}: a lease for another model that is released before it loads (its task failed its checks) leaves the loaded model loaded`, { timeout: 90_000 }, () =>
      withEngine({ slots: 2, maxLoadedModels: 1, keepAliveMs: 60_000, parallelMode }, async ({ engine, tiny, addModel }) => {
        const other = addModel({ ...LMSP_TINY, name: 'other' });
        const first = engine.acquire(tiny)!;
        await first.load(new AbortController().signal);
        first.release();
        const lease = engine.acquire(other);
        assert.ok(lease, 'a slot for the other model: lmsp-tiny is idle and may make room');
        assert.equal(lease.needsLoad, true);
        assert.ok(engine.isLoaded(tiny), 'nothing is unloaded before the load');
        assert.equal(engine.acquire(tiny), null, 'lmsp-tiny takes no new work while it is to make room');
        lease.release();
        assert.deepEqual([...engine.loadedModelIds()], ['lmsp-tiny'], 'still loaded');
        const again = engine.acquire(tiny);
        assert.ok(again);
        assert.equal(again.needsLoad, false, 'and used as it is');
        again.release();
        // A lease that loads makes the room it asked for.
        const loads = engine.acquire(other)!;
        await loads.load(new AbortController().signal);
        assert.deepEqual([...engine.loadedModelIds()], ['other']);
        loads.release();
      }));
  }
});
