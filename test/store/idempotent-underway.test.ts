/**
 * LMSP 8: a keyed effect whose preparation takes long (a registration hashes the whole file) is
 * prepared once. The same request arriving meanwhile waits for it and gets its answer; another
 * request with the same key is refused at once.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServiceError } from '../../src/domain/errors.js';
import { Store } from '../../src/store/index.js';
import type { IdempotencyKey } from '../../src/store/idempotency.js';
import { withDataDir } from '../helpers/data-dir.js';

const key = (fingerprint: string, keyHash = 'k'.repeat(64)): IdempotencyKey => ({ scope: 'client:cli_a', keyHash, fingerprint, sealingKey: null, ttlMs: 60_000 });

describe('a keyed effect underway (LMSP 8)', () => {
  test('the same request meanwhile waits and replays; another request with the key is 422 at once; a failed first leaves the key free', () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      let prepared = 0;
      let finishFirst!: () => void;
      const slow = new Promise<void>((resolve) => {
        finishFirst = resolve;
      });
      const register = (fingerprint: string, prepare: () => Promise<void>) => store.idempotent(key(fingerprint), {
        prepare: async () => {
          prepared += 1;
          await prepare();
        },
        effect: () => ({ result: prepared, record: { answer: { status: 201, body: { n: prepared } } } }),
      });
      const first = register('same', () => slow);
      const second = register('same', async () => undefined);
      await assert.rejects(register('other', async () => undefined), (error: unknown) => error instanceof ServiceError && error.code === 'idempotency_key_reused');
      finishFirst();
      assert.deepEqual(await first, { result: 1 });
      assert.deepEqual(await second, { replay: { status: 201, body: { n: 1 } } });
      assert.equal(prepared, 1, 'prepared once');

      // A first attempt that fails records nothing: the one waiting behind it does the work.
      const failing = store.idempotent(key('again', 'j'.repeat(64)), {
        prepare: () => Promise.reject(new Error('the file went away')),
        effect: () => ({ result: 'first', record: { answer: { status: 201, body: {} } } }),
      });
      const behind = store.idempotent(key('again', 'j'.repeat(64)), {
        prepare: () => undefined,
        effect: () => ({ result: 'behind', record: { answer: { status: 201, body: {} } } }),
      });
      await assert.rejects(failing, /the file went away/);
      assert.deepEqual(await behind, { result: 'behind' });
    } finally {
      await store.close();
    }
  }));
});
