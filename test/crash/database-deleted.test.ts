/**
 * The database file deleted from under the service (LMSP 11.2: a 202 means the task is on disk).
 * SQLite goes on writing to the open file, which no path names any more: the service notices,
 * stops, and writes that file back where it was, so nothing it acknowledged is lost; and a start
 * that finds the database's log without the database refuses rather than starting over beside it.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { ResponseObject } from '../../src/api/types.js';
import { runCli } from '../helpers/cli.js';
import { api, waitFor, withService } from '../helpers/service.js';

describe('the database deleted from under the service (LMSP 11)', () => {
  test('deleted while the service runs: it stops with exit 74 and writes the database back, with everything it committed', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, async (service) => {
      const finished = await service.client.createResponse({ model: 'lmsp-tiny', input: 'kept', max_output_tokens: 5, seed: 1 });
      const running = await service.client.createResponse({ model: 'lmsp-tiny', input: 'goes on', background: true, max_output_tokens: 300, seed: 2 });
      await waitFor(async () => (await service.client.getTask(running.body.task.id)).last_sequence_number > 8, { what: 'the background task to be generating' });
      const database = join(service.dataDir, 'lmsp.db');
      rmSync(database);
      // Accepted after the file went: a 202 still means on disk (unless the service is already stopping).
      const late = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'late', background: true, max_output_tokens: 5 } })
        .catch(() => null);
      const lateId = late?.status === 202 ? ((await late.json()) as ResponseObject).id : null;
      if (late) assert.ok(late.status === 202 || late.status === 503, `answered ${late.status}`);

      const code = await waitFor(() => service.child.exitCode, { timeoutMs: 30_000, what: 'the service to stop' });
      assert.equal(code, 74, service.output());
      assert.match(service.output(), /was deleted while the service ran/);
      assert.match(service.output(), /written back/);
      assert.ok(existsSync(database), 'the database is back at its path');

      const restarted = await service.restart();
      assert.equal((await restarted.client.getResponse(finished.body.id)).id, finished.body.id);
      if (lateId) assert.equal((await restarted.client.getResponse(lateId)).id, lateId, 'the 202 after the deletion was kept');
      const resumed = await waitFor(async () => {
        const current = await restarted.client.getResponse(running.body.id);
        return current.task.status === 'completed' ? current : null;
      }, { timeoutMs: 60_000, what: 'the background task to finish' });
      assert.equal(resumed.usage?.output_tokens, 300, 'resumed where it was');
    }));

  test('deleted and stopped at once (before the check every 2 s): the stop writes it back', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      const made = await service.client.createResponse({ model: 'lmsp-tiny', input: 'kept', background: true, max_output_tokens: 5 });
      const database = join(service.dataDir, 'lmsp.db');
      rmSync(database);
      await service.stop();
      assert.ok(existsSync(database), `written back:\n${service.output()}`);
      assert.equal(statSync(database).mode & 0o777, 0o600, 'private to its owner, as the database is');
      const restarted = await service.restart();
      assert.equal((await restarted.client.getResponse(made.body.id)).id, made.body.id);
    }));

  test('replaced by another file while the service runs: the service stops, keeps the database it ran on beside it, and the next start serves the file put there', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      const database = join(service.dataDir, 'lmsp.db');
      const before = await service.client.createResponse({ model: 'lmsp-tiny', input: 'in the backup', max_output_tokens: 3 });
      // An operator restores a backup over the running service's database (a new file, renamed in).
      const backup = new BetterSqlite3(database, { readonly: true });
      await backup.backup(`${database}.backup`);
      backup.close();
      const after = await service.client.createResponse({ model: 'lmsp-tiny', input: 'after the backup', max_output_tokens: 3 });
      renameSync(`${database}.backup`, database);
      const code = await waitFor(() => service.child.exitCode, { timeoutMs: 30_000, what: 'the service to stop' });
      assert.equal(code, 74, service.output());
      assert.equal(existsSync(`${database}-wal`), false, 'no log of the other database beside it, to be replayed onto it');
      const copies = readdirSync(service.dataDir).filter((name) => name.startsWith('lmsp.db.lost-'));
      assert.equal(copies.length, 1, service.output());
      const copy = join(service.dataDir, copies[0]!);
      assert.equal(statSync(copy).mode & 0o777, 0o600);
      const kept = new BetterSqlite3(copy, { readonly: true });
      assert.equal((kept.prepare('SELECT count(*) AS n FROM responses WHERE id IN (?, ?)').get(before.body.id, after.body.id) as { n: number }).n, 2, 'the copy holds everything');
      kept.close();
      const restarted = await service.restart();
      assert.equal((await restarted.client.getResponse(before.body.id)).id, before.body.id, 'the backup serves');
      assert.equal((await api(restarted, `/v1/responses/${after.body.id}`)).status, 404, 'as it was when it was taken');
    }));

  test('its write-ahead log deleted while the service runs: it stops with exit 74, writing what the log held into the database', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      const first = await service.client.createResponse({ model: 'lmsp-tiny', input: 'before', background: true, max_output_tokens: 5 });
      const log = join(service.dataDir, 'lmsp.db-wal');
      rmSync(log);
      const late = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'after', background: true, max_output_tokens: 5 } })
        .catch(() => null);
      const lateId = late?.status === 202 ? ((await late.json()) as ResponseObject).id : null;
      const code = await waitFor(() => service.child.exitCode, { timeoutMs: 30_000, what: 'the service to stop' });
      assert.equal(code, 74, service.output());
      assert.match(service.output(), /write-ahead log .* was deleted while the service ran/);
      const restarted = await service.restart();
      assert.equal((await restarted.client.getResponse(first.body.id)).id, first.body.id);
      if (lateId) assert.equal((await restarted.client.getResponse(lateId)).id, lateId, 'the 202 after the deletion was kept');
    }));

  test('its log left without it (deleted while the service was down): every command refuses (65) and touches nothing', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 3 });
      await service.kill();
      const database = join(service.dataDir, 'lmsp.db');
      const log = `${database}-wal`;
      assert.ok(statSync(log).size > 0, 'a crash leaves the log');
      rmSync(database);
      const before = readFileSync(log);
      for (const args of [['serve', '--port', '0'], ['doctor'], ['models', 'ls']]) {
        const result = await runCli([...args, '--data-dir', service.dataDir]);
        // doctor reports what it found and exits 1 on any failure (operations.md).
        assert.equal(result.code, args[0] === 'doctor' ? 1 : 65, `${args.join(' ')}: ${result.stderr}`);
        assert.match(result.stdout + result.stderr, /write-ahead log lmsp\.db-wal is there: the database was deleted or moved/, args.join(' '));
        assert.equal(existsSync(database), false, `${args.join(' ')} made no new database`);
        assert.deepEqual(readFileSync(log), before, `${args.join(' ')} left the log as it was`);
      }
    }));
});
