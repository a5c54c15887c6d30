import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { Store } from '../../src/store/index.js';
import { nowSeconds } from '../../src/time.js';
import { runCli } from '../helpers/cli.js';
import { withDataDir } from '../helpers/data-dir.js';
import { insertResponseTask, machineOf, makeResponseAndTask } from '../helpers/fixtures.js';
import { withService, type TestService } from '../helpers/service.js';

/** Back-dates a finished task (instead of waiting), as if it had finished `secondsAgo`. */
function backDate(service: TestService, taskId: string, secondsAgo: number): void {
  const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'));
  db.pragma('busy_timeout = 5000');
  const at = Math.floor(Date.now() / 1000) - secondsAgo;
  db.prepare('UPDATE tasks SET created_at = ?, finished_at = ? WHERE id = ?').run(at, at, taskId);
  db.close();
}

describe('lmsp gc runs the sweeper of the running service (LMSP section 10)', () => {
  test('with the service running, gc keeps to the retention the service was started with; --retention still overrides', { timeout: 90_000 }, () =>
    withService({ args: ['--retention', 'forever'] }, async (service) => {
      const dir = ['--data-dir', service.dataDir];
      const old = await service.client.createResponse({ model: 'lmsp-tiny', input: 'kept forever', max_output_tokens: 2 });
      backDate(service, old.body.task.id, 30 * 24 * 3600);

      const dry = await runCli(['gc', '--dry-run', '--json', ...dir]);
      assert.equal(dry.code, 0, dry.stderr);
      assert.equal((JSON.parse(dry.stdout) as { tasks: number }).tasks, 0, 'retention forever: nothing would go');
      const swept = await runCli(['gc', '--json', ...dir]);
      assert.equal(swept.code, 0, swept.stderr);
      assert.equal((JSON.parse(swept.stdout) as { tasks: number }).tasks, 0);
      assert.equal((await service.client.getTask(old.body.task.id)).id, old.body.task.id, 'the old task is still there');

      const overridden = await runCli(['gc', '--retention', '7d', '--json', ...dir]);
      assert.equal(overridden.code, 0, overridden.stderr);
      assert.equal((JSON.parse(overridden.stdout) as { tasks: number }).tasks, 1, 'an explicit --retention is what the operator asked for');
    }));

  test('gc --vacuum rewrites a database made before auto_vacuum was kept to its smallest size; not under a running service', { timeout: 90_000 }, () =>
    withDataDir(async (dataDir) => {
      const store = Store.open(dataDir);
      // As databases made before lmsp kept auto_vacuum incremental are: free pages stay in the file.
      store.db.sqlite.pragma('auto_vacuum = NONE');
      store.db.sqlite.exec('VACUUM');
      const now = nowSeconds();
      for (let i = 0; i < 800; i++) {
        const { response, task } = makeResponseAndTask({ createdAt: now - 7200 });
        response.instructions = 'x'.repeat(4000);
        const inserted = store.db.transaction((tx) => insertResponseTask(store, tx, response, task));
        store.db.transaction((tx) => machineOf(store).cancel(tx, inserted.id));
      }
      store.db.sqlite.prepare('UPDATE tasks SET finished_at = ?').run(now - 7200);
      await store.close();

      const ran = await runCli(['gc', '--vacuum', '--retention', '1h', '--json', '--data-dir', dataDir]);
      assert.equal(ran.code, 0, ran.stderr);
      const result = JSON.parse(ran.stdout) as { tasks: number; vacuum: { bytes_before: number; bytes_after: number } };
      assert.equal(result.tasks, 800);
      assert.ok(result.vacuum.bytes_after < result.vacuum.bytes_before / 4, JSON.stringify(result.vacuum));
      const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true });
      assert.equal(db.pragma('auto_vacuum', { simple: true }), 2, 'from now on the sweeper gives freed pages back');
      db.close();

      await withService({ dataDir }, async () => {
        const refused = await runCli(['gc', '--vacuum', '--data-dir', dataDir]);
        assert.equal(refused.code, 1);
        assert.match(refused.stderr, /stop the service/);
      });
    }, 'gc-vacuum'));
});
