import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { statSync } from 'node:fs';
import { Store } from '../../src/store/index.js';
import { Sweeper } from '../../src/tasks/sweeper.js';
import { nowSeconds } from '../../src/time.js';
import { withDataDir } from '../helpers/data-dir.js';
import { insertResponseTask, machineOf, makeResponseAndTask } from '../helpers/fixtures.js';

describe('retention probe (what decides whether a sweep starts at all)', () => {
  test('anythingExpired sees old finished tasks, finished store:false ones, expired keys and codes; never unfinished ones', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const now = nowSeconds();
    const cutoff = now - 3600;
    assert.equal(store.retention.anythingExpired(cutoff, now), false, 'an empty database has nothing to sweep');

    const old = makeResponseAndTask({ createdAt: now - 7200 });
    const unfinished = store.db.transaction((tx) => insertResponseTask(store, tx, old.response, old.task));
    store.db.sqlite.prepare('UPDATE tasks SET created_at = ? WHERE id = ?').run(now - 7200, unfinished.id);
    assert.equal(store.retention.anythingExpired(cutoff, now), false, 'an old unfinished task is never expired');

    store.db.transaction((tx) => machineOf(store).cancel(tx, unfinished.id));
    store.db.sqlite.prepare('UPDATE tasks SET finished_at = ? WHERE id = ?').run(now - 7200, unfinished.id);
    assert.equal(store.retention.anythingExpired(cutoff, now), true, 'an old finished task is expired');
    assert.equal(store.retention.anythingExpired(null, now), false, 'nothing expires under retention forever');
    assert.equal(store.retention.anythingExpired(now - 3 * 7200, now), false, 'a finished task younger than the cutoff stays');

    const ephemeral = makeResponseAndTask({ store: false });
    const task = store.db.transaction((tx) => insertResponseTask(store, tx, ephemeral.response, ephemeral.task));
    assert.equal(store.retention.anythingExpired(null, now), false, 'an unfinished store:false task stays');
    store.db.transaction((tx) => machineOf(store).cancel(tx, task.id));
    assert.equal(store.retention.anythingExpired(null, now), true, 'a finished store:false task goes');
    store.db.sqlite.prepare('DELETE FROM tasks WHERE id = ?').run(task.id);

    store.db.sqlite.prepare("INSERT INTO pairing_codes (code_hash, name, scopes, created_at, expires_at) VALUES (x'01', NULL, 'responses', ?, ?)").run(now - 100, now - 10);
    assert.equal(store.retention.anythingExpired(null, now), true, 'an expired pairing code goes');
    store.db.sqlite.prepare('DELETE FROM pairing_codes').run();

    store.db.sqlite.prepare(`INSERT INTO idempotency_keys (scope, key, fingerprint, state, status_code, body, task_id, created_at, expires_at)
      VALUES ('cli_test', 'k', 'f', 'done', 200, '{}', NULL, ?, ?)`).run(now - 100, now - 1);
    assert.equal(store.retention.anythingExpired(null, now), true, 'an expired idempotency key goes');
  }));

  test('a sweep gives the pages it freed back to the file system: the database shrinks at the next checkpoint', async () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      assert.equal(store.db.sqlite.pragma('auto_vacuum', { simple: true }), 2, 'a new database is made with incremental auto_vacuum');
      const now = nowSeconds();
      const ids: string[] = [];
      for (let i = 0; i < 1500; i++) {
        const { response, task } = makeResponseAndTask({ createdAt: now - 7200 });
        response.instructions = 'x'.repeat(4000);
        ids.push(store.db.transaction((tx) => insertResponseTask(store, tx, response, task)).id);
      }
      for (const id of ids) store.db.transaction((tx) => machineOf(store).cancel(tx, id));
      store.db.sqlite.prepare('UPDATE tasks SET finished_at = ?').run(now - 7200);
      store.db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
      const full = statSync(store.db.path).size;
      assert.ok(full > 6_000_000, `${full} bytes written`);

      const counts = await new Sweeper(store, { retentionMs: 3_600_000, sweepIntervalMs: Infinity }).sweep();
      assert.equal(counts.tasks, 1500);
      assert.equal(store.db.sqlite.pragma('freelist_count', { simple: true }), 0, 'no free page is kept');
      store.db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
      const after = statSync(store.db.path).size;
      assert.ok(after < full / 4, `${full} bytes before the sweep, ${after} after`);
    } finally {
      await store.close();
    }
  }));

  test('totalChanges counts what this connection wrote', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const before = store.db.totalChanges();
    const { response, task } = makeResponseAndTask();
    store.db.transaction((tx) => insertResponseTask(store, tx, response, task));
    assert.ok(store.db.totalChanges() > before);
    const after = store.db.totalChanges();
    assert.equal(store.db.totalChanges(), after, 'reading changes nothing');
  }));
});

describe('sweeping a log longer than a batch (LMSP 10)', () => {
  test('the task and its response go first, in one transaction; its log follows in later batches, across a restart too', () => withDataDir((dir) => {
    let store = Store.open(dir);
    const { response, task } = makeResponseAndTask();
    const created = store.db.transaction((tx) => insertResponseTask(store, tx, response, task));
    store.db.transaction((tx) => machineOf(store).cancel(tx, created.id));
    // A long log: 2,500 more events after the two of the cancelled task.
    store.db.transaction(() => {
      for (let seq = 3; seq <= 2502; seq++) store.events.append(created.id, seq, 'response.output_text.delta', 1, { delta: 'x' });
    });
    store.db.sqlite.prepare('UPDATE tasks SET last_sequence_number = 2502, finished_at = 1000 WHERE id = ?').run(created.id);
    const cutoff = 2000;
    const logRows = () => store.db.sqlite.prepare('SELECT count(*) FROM task_log WHERE task_id = ?').pluck().get(created.id) as number;

    const first = store.db.transaction(() => store.retention.sweepBatch(cutoff, 1000));
    assert.equal(first.tasks, 1);
    assert.equal(store.tasks.get(created.id), null, 'the task is gone at once');
    assert.equal(store.responses.get(response.id), null, 'and its response');
    assert.ok(logRows() > 0, 'its log is left for the next batches');
    assert.equal(store.retention.countExpired(cutoff).events, logRows(), 'a dry run counts what is left of it');
    assert.ok(store.retention.anythingExpired(cutoff, nowSeconds()), 'a sweep is still owed');

    // The service stops here (a crash); the next start's sweep finishes the log.
    store.db.sqlite.close();
    store = Store.open(dir);
    for (;;) {
      const batch = store.db.transaction(() => store.retention.sweepBatch(cutoff, 1000));
      assert.ok(batch.tasks * 3 + batch.events <= 1000, 'a batch keeps its bound');
      if (batch.tasks === 0 && batch.events === 0) break;
    }
    assert.equal(logRows(), 0);
    assert.equal(store.db.sqlite.prepare('SELECT count(*) FROM swept_task_logs').pluck().get(), 0);
    assert.equal(store.retention.anythingExpired(cutoff, nowSeconds()), false);
  }));
});
