import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { Database, DatabaseOpenError, EXIT_DATABASE_NOT_USABLE, EXIT_DATABASE_TOO_NEW, loadMigrations } from '../../src/store/db.js';
import { ServiceError } from '../../src/domain/errors.js';
import { withDataDir, writeCorruptDatabase } from '../helpers/data-dir.js';

describe('database (LMSP 11.1, project decisions)', () => {
  test('creates all seven tables of LMSP 11.1 with WAL, synchronous FULL and mode 0600', () => withDataDir((dir) => {
    const db = Database.open(dir);
    // task_events is a view over task_log since migration 0009 (compact delta events).
    const tables = (db.sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' OR type = 'view'").all() as { name: string }[]).map((t) => t.name);
    for (const table of ['service_config', 'clients', 'models', 'responses', 'tasks', 'task_events', 'idempotency_keys']) {
      assert.ok(tables.includes(table), `missing table ${table}`);
    }
    assert.equal(db.sqlite.pragma('journal_mode', { simple: true }), 'wal');
    assert.equal(db.sqlite.pragma('synchronous', { simple: true }), 2, 'synchronous must be FULL (2)');
    assert.ok(Number(db.sqlite.pragma('busy_timeout', { simple: true })) >= 1000);
    assert.equal(statSync(join(dir, 'lmsp.db')).mode & 0o777, 0o600);
    assert.equal(db.schemaVersion, loadMigrations().at(-1)!.version);
    db.sqlite.close();
  }));

  test('migrations are recorded and not applied twice', () => withDataDir((dir) => {
    const created = Database.open(dir);
    assert.equal(created.upgradedFrom, null, 'a new database is not an upgrade');
    created.sqlite.close();
    const again = Database.open(dir);
    const rows = again.sqlite.prepare('SELECT version FROM schema_migrations').all();
    assert.equal(rows.length, loadMigrations().length);
    assert.equal(again.upgradedFrom, null, 'a database already at the latest schema was not upgraded');
    again.sqlite.close();
  }));

  test('a version-1 database migrates with its tasks, ids and constraints intact', () => withDataDir((dir) => {
    const first = loadMigrations()[0]!;
    const old = new BetterSqlite3(join(dir, 'lmsp.db'));
    old.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    old.exec(first.sql);
    old.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(first.version, first.name);
    const insert = old.prepare(`INSERT INTO tasks (seq, id, response_id, client_id, model, status, on_restart, created_at, finished_at)
      VALUES (?, ?, ?, 'cli_a', 'lmsp-tiny', ?, 'resume', 1, ?)`);
    insert.run(7, 'task_a', 'resp_a', 'queued', null);
    insert.run(9, 'task_b', 'resp_b', 'completed', 5);
    old.close();
    const db = Database.open(dir);
    assert.equal(db.schemaVersion, loadMigrations().at(-1)!.version);
    assert.equal(db.upgradedFrom, first.version, 'the schema it was opened with, for the service to say it upgraded it');
    assert.deepEqual(db.sqlite.prepare('SELECT seq, id, status FROM tasks ORDER BY seq').all(),
      [{ seq: 7, id: 'task_a', status: 'queued' }, { seq: 9, id: 'task_b', status: 'completed' }]);
    assert.throws(() => db.sqlite.prepare("UPDATE tasks SET status = 'paused' WHERE id = 'task_a'").run(), /CHECK constraint/);
    assert.throws(() => db.sqlite.prepare("UPDATE tasks SET on_restart = 'never' WHERE id = 'task_a'").run(), /CHECK constraint/);
    const plan = db.sqlite.prepare("EXPLAIN QUERY PLAN SELECT seq FROM tasks WHERE status = 'queued' ORDER BY seq").all() as { detail: string }[];
    assert.match(plan.map((row) => row.detail).join(' '), /tasks_unfinished/);
    db.sqlite.close();
  }));

  test('writing a task builds no temporary index (no IN list in its CHECKs or partial indexes)', () => withDataDir((dir) => {
    const db = Database.open(dir);
    const writes = [
      `INSERT INTO tasks (id, response_id, client_id, model, status, on_restart, created_at) VALUES ('t', 'r', 'c', 'm', 'queued', 'fail', 1)`,
      "UPDATE tasks SET status = ?, finished_at = ?, last_sequence_number = ? WHERE id = ? AND status = ?",
      "UPDATE tasks SET output_tokens = ?, last_sequence_number = ? WHERE id = ?",
      "DELETE FROM tasks WHERE id = ? AND (status = 'completed' OR status = 'failed' OR status = 'cancelled')",
    ];
    for (const sql of writes) {
      const program = db.sqlite.prepare(`EXPLAIN ${sql}`).all(...sql.split('?').slice(1).map(() => null)) as { opcode: string }[];
      assert.ok(program.length > 0);
      assert.equal(program.filter((op) => op.opcode === 'OpenEphemeral').length, 0, sql);
    }
    db.sqlite.close();
  }));

  test('refuses a file that is not a database, and leaves it untouched', () => withDataDir((dir) => {
    const path = join(dir, 'lmsp.db');
    writeFileSync(path, 'this is not a database, just text that happens to be here.\n'.repeat(10));
    const before = readFileSync(path);
    assert.throws(() => Database.open(dir), (error: unknown) =>
      error instanceof DatabaseOpenError && error.exitCode === EXIT_DATABASE_NOT_USABLE && /not an SQLite database/.test(error.message));
    assert.deepEqual(readFileSync(path), before);
  }));

  test('refuses a corrupt database, and leaves it untouched', () => withDataDir((dir) => {
    const path = writeCorruptDatabase(dir);
    const before = readFileSync(path);
    assert.throws(() => Database.open(dir), (error: unknown) =>
      error instanceof DatabaseOpenError && error.exitCode === EXIT_DATABASE_NOT_USABLE && /corrupt/.test(error.message));
    assert.deepEqual(readFileSync(path), before);
  }));

  test('refuses a database from a newer schema', () => withDataDir((dir) => {
    const db = Database.open(dir);
    db.sqlite.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, ?, 0)').run('9999_future');
    db.sqlite.close();
    assert.throws(() => Database.open(dir), (error: unknown) =>
      error instanceof DatabaseOpenError && error.exitCode === EXIT_DATABASE_TOO_NEW && /newer lmsp/.test(error.message));
  }));

  test("refuses an SQLite database that belongs to something else, and leaves its bytes, journal mode and file mode as they were", () => withDataDir((dir) => {
    const path = join(dir, 'lmsp.db');
    const other = new BetterSqlite3(path);
    other.exec('CREATE TABLE accounts (id INTEGER)');
    other.close();
    chmodSync(path, 0o644);
    const before = readFileSync(path);
    assert.throws(() => Database.open(dir), (error: unknown) =>
      error instanceof DatabaseOpenError && error.exitCode === EXIT_DATABASE_NOT_USABLE && /not one of lmsp's/.test(error.message));
    assert.deepEqual(readFileSync(path), before, 'not switched to WAL, not touched at all');
    assert.equal(statSync(path).mode & 0o777, 0o644);
  }));

  test('a database from a newer schema is not switched or changed either', () => withDataDir((dir) => {
    const db = Database.open(dir);
    db.sqlite.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, ?, 0)').run('9999_future');
    db.sqlite.pragma('journal_mode = DELETE');
    db.sqlite.close();
    const path = join(dir, 'lmsp.db');
    const before = readFileSync(path);
    assert.throws(() => Database.open(dir), (error: unknown) => error instanceof DatabaseOpenError && error.exitCode === EXIT_DATABASE_TOO_NEW);
    assert.deepEqual(readFileSync(path), before);
  }));

  test('a database path that is a folder gets a clear error, not a crash', () => withDataDir((dir) => {
    mkdirSync(join(dir, 'lmsp.db'));
    assert.throws(() => Database.open(dir), (error: unknown) =>
      error instanceof DatabaseOpenError && error.exitCode === EXIT_DATABASE_NOT_USABLE && /is not a file/.test(error.message));
  }));

  test('group commit: concurrent writes share a transaction and each resolves after commit', () => withDataDir(async (dir) => {
    const db = Database.open(dir);
    db.sqlite.exec('CREATE TABLE t (x INTEGER)');
    const insert = db.sqlite.prepare('INSERT INTO t VALUES (?)');
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => db.write(() => { insert.run(i); return i; })));
    assert.deepEqual(results, Array.from({ length: 50 }, (_, i) => i));
    assert.equal((db.sqlite.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n, 50);
    await db.close();
  }));

  test('group commit: a failing write rolls back alone, the others commit', () => withDataDir(async (dir) => {
    const db = Database.open(dir);
    db.sqlite.exec('CREATE TABLE t (x INTEGER UNIQUE)');
    const insert = db.sqlite.prepare('INSERT INTO t VALUES (?)');
    const outcomes = await Promise.allSettled([
      db.write(() => insert.run(1)),
      db.write(() => { insert.run(2); insert.run(1); }), // violates UNIQUE after a first insert
      db.write(() => insert.run(3)),
    ]);
    assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
    const values = (db.sqlite.prepare('SELECT x FROM t ORDER BY x').all() as { x: number }[]).map((r) => r.x);
    assert.deepEqual(values, [1, 3], 'the failed write must leave nothing behind, not even its first insert');
    await db.close();
  }));

  test('a read-only database answers storage_unavailable', () => withDataDir(async (dir) => {
    const db = Database.open(dir);
    db.sqlite.exec('CREATE TABLE t (x TEXT)');
    db.sqlite.pragma('query_only = 1');
    await assert.rejects(db.write(() => db.sqlite.prepare('INSERT INTO t VALUES (?)').run('x')),
      (error: unknown) => error instanceof ServiceError && error.code === 'storage_unavailable');
    db.sqlite.pragma('query_only = 0');
    assert.equal((db.sqlite.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n, 0);
    await db.close();
  }));

  test('a full database answers storage_unavailable and loses nothing committed', () => withDataDir(async (dir) => {
    const db = Database.open(dir);
    db.sqlite.exec('CREATE TABLE t (x TEXT)');
    const insert = db.sqlite.prepare('INSERT INTO t VALUES (?)');
    await db.write(() => insert.run('kept'));
    const pages = Number(db.sqlite.pragma('page_count', { simple: true }));
    db.sqlite.pragma(`max_page_count = ${pages}`);
    const outcomes = await Promise.allSettled([
      db.write(() => insert.run('a'.repeat(100_000))),
      db.write(() => insert.run('small')),
    ]);
    for (const outcome of outcomes) {
      assert.equal(outcome.status, 'rejected');
      assert.ok((outcome as PromiseRejectedResult).reason instanceof ServiceError);
      assert.equal(((outcome as PromiseRejectedResult).reason as ServiceError).code, 'storage_unavailable');
    }
    assert.throws(() => db.transaction(() => insert.run('b'.repeat(100_000))), (e: unknown) => e instanceof ServiceError && e.code === 'storage_unavailable');
    const values = (db.sqlite.prepare('SELECT x FROM t').all() as { x: string }[]).map((r) => r.x);
    assert.deepEqual(values, ['kept']);
    await db.close();
  }));
});
