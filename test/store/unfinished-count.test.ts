/**
 * LMSP 16: a client's unfinished tasks, as the cap on creates reads them, are kept by triggers
 * (migration 0010) and always equal a count of the tasks themselves, through inserts, status
 * changes both ways and deletes; a database written before 0010 starts with its counts right.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { UNFINISHED_STATUSES, type Task, type TaskStatus } from '../../src/domain/tasks.js';
import { Database, loadMigrations } from '../../src/store/db.js';
import { TaskTable } from '../../src/store/tasks.js';
import { newTask } from '../../src/tasks/new-task.js';
import { withDataDir } from '../helpers/data-dir.js';

function counted(db: Database, clientId: string): number {
  const statuses = UNFINISHED_STATUSES.map((status) => `'${status}'`).join(', ');
  return (db.sqlite.prepare(`SELECT count(*) AS n FROM tasks WHERE client_id = ? AND status IN (${statuses})`).get(clientId) as { n: number }).n;
}

function task(clientId: string): Task {
  return newTask({ kind: 'response', clientId, model: 'm', onRestart: 'fail', createdAt: 1 });
}

describe('unfinished tasks per client (LMSP 16, migration 0010)', () => {
  test('the kept count follows inserts, moves out of and back into the unfinished statuses, and deletes', () => withDataDir((dir) => {
    const db = Database.open(dir);
    const tasks = new TaskTable(db.sqlite);
    const check = () => {
      for (const client of ['client_a', 'client_b']) assert.equal(tasks.countUnfinishedForClient(client), counted(db, client), client);
    };
    assert.equal(tasks.countUnfinishedForClient('client_a'), 0);
    const made = [task('client_a'), task('client_a'), task('client_a'), task('client_b')];
    for (const each of made) tasks.insert(each);
    check();
    assert.equal(tasks.countUnfinishedForClient('client_a'), 3);
    const move = (each: Task, from: TaskStatus, to: TaskStatus) => assert.ok(tasks.update({ ...each, status: to }, from));
    move(made[0]!, 'queued', 'running');
    check();
    assert.equal(tasks.countUnfinishedForClient('client_a'), 3, 'running is still unfinished');
    move(made[0]!, 'running', 'completed');
    move(made[1]!, 'queued', 'cancelled');
    check();
    assert.equal(tasks.countUnfinishedForClient('client_a'), 1);
    assert.ok(!tasks.update({ ...made[2]!, status: 'failed' }, 'running'), 'a conditional update that misses changes nothing');
    check();
    // A finished task written back as unfinished (not a transition the service makes) still counts.
    move(made[1]!, 'cancelled', 'queued');
    check();
    tasks.delete(made[1]!.id);
    tasks.delete(made[0]!.id);
    check();
    assert.equal(tasks.countUnfinishedForClient('client_a'), 1);
    // A finished task written as such from the start never counts.
    tasks.insert({ ...task('client_b'), status: 'completed' });
    check();
    assert.equal(tasks.countUnfinishedForClient('client_b'), 1);
    db.sqlite.close();
  }));

  test('a database written before 0010 starts with each client\'s count', () => withDataDir((dir) => {
    // Tasks written by today's code, then the database taken back to before 0010.
    const first = Database.open(dir);
    const before = new TaskTable(first.sqlite);
    for (const status of ['queued', 'running', 'cancelling', 'completed', 'failed'] as const) before.insert({ ...task('client_a'), status });
    before.insert(task('client_b'));
    first.sqlite.close();
    const old = new BetterSqlite3(join(dir, 'lmsp.db'));
    for (const { name } of old.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'tasks_unfinished_count_%'").all() as Array<{ name: string }>) {
      old.exec(`DROP TRIGGER ${name}`);
    }
    old.exec('DROP TABLE unfinished_tasks_per_client');
    // And what the migrations after 0010 made.
    old.exec('DROP TABLE swept_task_logs');
    old.exec('ALTER TABLE models DROP COLUMN file_identity');
    old.exec('ALTER TABLE responses DROP COLUMN truncation');
    old.exec('ALTER TABLE model_pulls DROP COLUMN resume_seen_etag');
    old.exec('ALTER TABLE model_pulls DROP COLUMN resume_seen_last_modified');
    old.exec('ALTER TABLE model_pulls DROP COLUMN resume_seen_kept');
    old.exec('ALTER TABLE idempotency_keys DROP COLUMN ttl_seconds');
    old.prepare('DELETE FROM schema_migrations WHERE version >= 10').run();
    old.close();

    const db = Database.open(dir);
    assert.equal(db.schemaVersion, loadMigrations().at(-1)!.version);
    const tasks = new TaskTable(db.sqlite);
    assert.equal(tasks.countUnfinishedForClient('client_a'), 3);
    assert.equal(tasks.countUnfinishedForClient('client_b'), 1);
    assert.equal(tasks.countUnfinishedForClient('client_c'), 0);
    db.sqlite.close();
  }));
});
