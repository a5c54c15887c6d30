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
