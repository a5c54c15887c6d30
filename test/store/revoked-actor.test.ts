/**
 * LMSP 4: a revoke stops a token at once. A request authenticated just before the revoke may
 * reach its transaction just after it; creates and keyed effects check the client again inside
 * that transaction and write nothing for a revoked one.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import { ServiceError } from '../../src/domain/errors.js';
import { Store } from '../../src/store/index.js';
import { withDataDir } from '../helpers/data-dir.js';
import { machineOf, makeResponseAndTask } from '../helpers/fixtures.js';

function addClient(store: Store, id: string): void {
  store.clients.insert({ id, name: id, scopes: ['responses'], kind: 'paired', createdAt: 1, lastUsedAt: null, revokedAt: null }, createHash('sha256').update(id).digest());
}

function taskCount(store: Store): number {
  return (store.db.sqlite.prepare('SELECT count(*) AS n FROM tasks').get() as { n: number }).n;
}

describe('a revoked client writes nothing, even past authentication (LMSP 4)', () => {
  test('a create for a revoked client is refused inside its transaction; a live one is written', () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      addClient(store, 'cli_live');
      addClient(store, 'cli_gone');
      store.clients.revoke('cli_gone', 2);
      const create = (clientId: string) => {
        const { response, task } = makeResponseAndTask({ clientId });
        return store.createTask(null, {
          prepare: () => task,
          command: (prepared) => {
            const { task: created, events } = machineOf(store).draftCreate(prepared, response);
            return { record: { kind: 'response', response }, task: created, events, cap: null, key: null, recording: null };
          },
        });
      };
      assert.deepEqual(await create('cli_gone'), { revoked: true });
      assert.equal(taskCount(store), 0, 'nothing written for the revoked client');
      assert.ok('task' in await create('cli_live'));
      assert.equal(taskCount(store), 1);
      assert.deepEqual(await create('cli_unknown'), { revoked: true }, 'a client that does not exist is not live either');
    } finally {
      await store.close();
    }
  }));

  test('a keyed effect with an actor runs only while the actor is live', () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      addClient(store, 'cli_a');
      let runs = 0;
      const effect = () => store.idempotent(null, {
        actor: 'cli_a',
        prepare: () => undefined,
        effect: () => {
          runs += 1;
          return { result: runs, record: { answer: { status: 200, body: {} } } };
        },
      });
      assert.deepEqual(await effect(), { result: 1 });
      store.clients.revoke('cli_a', 2);
      await assert.rejects(effect(), (error: unknown) => error instanceof ServiceError && error.code === 'invalid_token');
      assert.equal(runs, 1, 'the effect did not run for the revoked client');
    } finally {
      await store.close();
    }
  }));
});
