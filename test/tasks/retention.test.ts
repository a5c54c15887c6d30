import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Database } from '../../src/store/db.js';
import { Maintenance } from '../../src/tasks/maintenance.js';
import { runCli } from '../helpers/cli.js';
import { withDataDir } from '../helpers/data-dir.js';
import { api, waitFor, withService, type TestService } from '../helpers/service.js';

/** Back-dates tasks in the database (instead of sleeping), as if they had finished long ago. */
function backDate(service: TestService, taskIds: string[], secondsAgo: number): void {
  const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'));
  db.pragma('busy_timeout = 5000');
  const at = Math.floor(Date.now() / 1000) - secondsAgo;
  const update = db.prepare('UPDATE tasks SET created_at = ?, finished_at = CASE WHEN finished_at IS NULL THEN NULL ELSE ? END WHERE id = ?');
  for (const id of taskIds) update.run(at, at, id);
  db.close();
}

describe('retention (LMSP section 10, 11.2)', () => {
  test('the sweep at startup deletes old finished tasks with their events and responses, never unfinished ones', { timeout: 90_000 }, () =>
    withService({ args: ['--retention', '1h'], env: { LMSP_DEBUG_TOKEN_DELAY_MS: '50' } }, async (service) => {
      const finished = await service.client.createResponse({ model: 'lmsp-tiny', input: 'old', max_output_tokens: 3 });
      const recent = await service.client.createResponse({ model: 'lmsp-tiny', input: 'new', max_output_tokens: 3 });
      const running = await service.client.createResponse({ model: 'lmsp-tiny', input: 'long', background: true, max_output_tokens: 5000 });
      const queued = await service.client.createResponse({ model: 'lmsp-tiny', input: 'waiting', background: true, max_output_tokens: 5 });
      await waitFor(async () => (await service.client.getTask(running.body.task.id)).status === 'running');
      await service.kill();
      // Old, all of them: only the finished one may go.
      backDate(service, [finished.body.task.id, running.body.task.id, queued.body.task.id], 30 * 24 * 3600);
      const restarted = await service.restart({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '50' } });
      assert.equal((await api(restarted, `/v1/responses/${finished.body.id}`)).status, 404);
      assert.equal((await api(restarted, `/v1/tasks/${finished.body.task.id}/events`)).status, 404);
      const db = new BetterSqlite3(join(restarted.dataDir, 'lmsp.db'), { readonly: true });
      assert.equal((db.prepare('SELECT count(*) AS n FROM task_events WHERE task_id = ?').get(finished.body.task.id) as { n: number }).n, 0);
      db.close();
      assert.equal((await api(restarted, `/v1/responses/${recent.body.id}`)).status, 200, 'recent finished tasks stay');
      assert.equal((await api(restarted, `/v1/tasks/${running.body.task.id}`)).status, 200, 'an old unfinished task stays');
      assert.equal((await api(restarted, `/v1/tasks/${queued.body.task.id}`)).status, 200, 'an old queued task stays');
    }));

  test('the sweeper also runs every --sweep-interval', { timeout: 60_000 }, () =>
    withService({ args: ['--retention', '1h', '--sweep-interval', '500ms'] }, async (service) => {
      const done = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
      backDate(service, [done.body.task.id], 2 * 3600);
      await waitFor(async () => (await api(service, `/v1/tasks/${done.body.task.id}`)).status === 404, { what: 'the periodic sweep' });
    }));

  test("retention 'forever' keeps everything", { timeout: 60_000 }, () =>
    withService({ args: ['--retention', 'forever', '--sweep-interval', '200ms'] }, async (service) => {
      const done = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
      backDate(service, [done.body.task.id], 10 * 365 * 24 * 3600);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      assert.equal((await api(service, `/v1/tasks/${done.body.task.id}`)).status, 200);
    }));

  test('lmsp gc --dry-run counts what lmsp gc deletes: tasks, events, idempotency keys, pairing codes', { timeout: 60_000 }, () => withService({}, async (service) => {
    const done = await api(service, '/v1/responses', { method: 'POST', headers: { 'idempotency-key': 'old-key' }, json: { model: 'lmsp-tiny', input: 'x', max_output_tokens: 4 } });
    const taskId = ((await done.json()) as { task: { id: string } }).task.id;
    const events = (await service.client.getTask(taskId)).last_sequence_number;
    await service.client.createPairingCode({ ttl_seconds: 1 });
    await service.client.createPairingCode({});
    await service.stop();
    backDate(service, [taskId], 8 * 24 * 3600);
    const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'));
    assert.equal(db.prepare('UPDATE idempotency_keys SET expires_at = 1').run().changes, 1, 'the create stored its key');
    db.prepare('UPDATE pairing_codes SET expires_at = 1 WHERE expires_at <= ?').run(Math.floor(Date.now() / 1000) + 5);
    db.close();
    const expected = { tasks: 1, events, idempotency_keys: 1, pairing_codes: 1 };
    const dry = await runCli(['gc', '--dry-run', '--json', '--data-dir', service.dataDir]);
    assert.equal(dry.code, 0, dry.stderr);
    assert.deepEqual(JSON.parse(dry.stdout), { dry_run: true, ...expected });
    const real = await runCli(['gc', '--json', '--data-dir', service.dataDir]);
    assert.equal(real.code, 0, real.stderr);
    assert.deepEqual(JSON.parse(real.stdout), { dry_run: false, ...expected });
    const again = await runCli(['gc', '--dry-run', '--json', '--data-dir', service.dataDir]);
    assert.deepEqual(JSON.parse(again.stdout), { dry_run: true, tasks: 0, events: 0, idempotency_keys: 0, pairing_codes: 0 });
    const text = await runCli(['gc', '--dry-run', '--data-dir', service.dataDir]);
    assert.match(text.stdout, /^would delete 0 finished tasks .*0 idempotency keys and 0 pairing codes \(nothing deleted\)$/m);
  }));
});

/** Linux: threads of a process, from /proc. */
function threadCount(pid: number): number {
  return Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}

/**
 * The WAL index (the -shm file, format documented by SQLite): `mxFrame` is the last valid frame,
 * `nBackfill` how many of them have been copied into the database by a checkpoint.
 */
function walProgress(dataDir: string): { frames: number; backfilled: number } {
  const shm = readFileSync(join(dataDir, 'lmsp.db-shm'));
  return { frames: shm.readUInt32LE(16), backfilled: shm.readUInt32LE(96) };
}

/** The WAL's salt, which changes each time the log starts over from its beginning. */
function walSalt(dataDir: string): string {
  return readFileSync(join(dataDir, 'lmsp.db-shm')).subarray(32, 40).toString('hex');
}

describe('maintenance worker (sweeps and WAL checkpoints off the request thread)', () => {
  test('under writes that never pause, the WAL starts over once past its limit instead of growing by every write', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      const db = Database.open(dataDir);
      db.sqlite.pragma('wal_autocheckpoint = 0'); // as the service's connection: checkpoints are the worker's
      db.sqlite.pragma('synchronous = NORMAL'); // many writes in a few seconds; durability is not what is tested
      db.sqlite.exec('CREATE TABLE filler (body BLOB)');
      const insert = db.sqlite.prepare('INSERT INTO filler VALUES (?)');
      const limit = 1024 * 1024;
      const maintenance = new Maintenance({ dataDir, retentionMs: Infinity, dbMaxPages: 0, walRestartBytes: limit }, Infinity,
        { info: () => {}, error: (message) => assert.fail(message) }, () => db.sqlite.prepare('SELECT total_changes()').pluck().get() as number, () => false);
      maintenance.start();
      try {
        // The worker thread starts at the first checkpoint tick: until it runs, nothing can start
        // the log over, and a machine slow to start a thread lets the log grow by every write. The
        // count starts at the first start-over, once the worker is there.
        let salt = walSalt(dataDir);
        for (const end = Date.now() + 30_000; walSalt(dataDir) === salt;) {
          assert.ok(Date.now() < end, 'the log started over within 30 s of writes');
          for (let i = 0; i < 10; i++) insert.run(Buffer.alloc(8192, i));
          await nextTurn();
        }
        salt = walSalt(dataDir);
        // Frames the log held before each start-over: the sum is what it would hold had it never started over.
        const held: number[] = [0];
        for (const end = Date.now() + 5000; Date.now() < end;) {
          for (let i = 0; i < 10; i++) insert.run(Buffer.alloc(8192, i));
          const now = walSalt(dataDir);
          if (now !== salt) {
            salt = now;
            held.push(0);
          }
          held[held.length - 1] = Math.max(held.at(-1)!, walProgress(dataDir).frames);
          await nextTurn(); // the checkpoint timer's turn; the worker runs beside these writes
        }
        const total = held.reduce((sum, frames) => sum + frames, 0);
        const largest = Math.max(...held);
        assert.ok(held.length >= 3, `the log started over ${held.length - 1} times in 5 s of writes (frames held: ${held.join(', ')})`);
        assert.ok(largest < total / 2, `at most ${largest} of ${total} frames at once (frames held: ${held.join(', ')})`);
      } finally {
        await maintenance.stop();
        await db.close();
      }
    }, 'wal-restart'));

  test('writes are checkpointed within seconds, and an idle service keeps no worker thread', { timeout: 90_000, skip: process.platform !== 'linux' }, () =>
    withService({}, async (service) => {
      const idleThreads = threadCount(service.pid);
      for (let i = 0; i < 20; i++) {
        await service.client.createResponse({ model: 'lmsp-tiny', input: `n${i}`, max_output_tokens: 2 });
      }
      const written = walProgress(service.dataDir).frames;
      assert.ok(written > 0, 'the writes went to the WAL');
      await waitFor(() => walProgress(service.dataDir).backfilled >= written, { timeoutMs: 10_000, what: 'a WAL checkpoint' });
      assert.ok(threadCount(service.pid) > idleThreads, 'a worker thread checkpointed');
      await waitFor(() => threadCount(service.pid) <= idleThreads, { timeoutMs: 30_000, what: 'the idle worker to exit' });
      // and a later write brings it back
      const later = await service.client.createResponse({ model: 'lmsp-tiny', input: 'later', max_output_tokens: 2 });
      assert.equal(later.status, 200);
      const again = walProgress(service.dataDir);
      await waitFor(() => walProgress(service.dataDir).backfilled >= again.frames && again.frames > 0, { timeoutMs: 10_000, what: 'the next checkpoint' });
    }));
});
