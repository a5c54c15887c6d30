/**
 * Retention of chat completions (LMSP 13, 10): a stored completion goes with its task once the
 * task is older than the retention period; a `store: false` one is never kept, even when a crash
 * stopped it before it could be deleted.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import type { ChatCompletionObject } from '../../src/api/chat-completions.js';
import { api, waitFor, withService, type TestService } from '../helpers/service.js';

const BODY = { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'Hello' }], max_completion_tokens: 3 };

function openDb(service: TestService): BetterSqlite3.Database {
  const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'));
  db.pragma('busy_timeout = 5000');
  return db;
}

/** Back-dates tasks (instead of sleeping), as if they had finished long ago. */
function backDate(service: TestService, taskIds: string[], secondsAgo: number): void {
  const db = openDb(service);
  const at = Math.floor(Date.now() / 1000) - secondsAgo;
  for (const id of taskIds) db.prepare('UPDATE tasks SET created_at = ?, finished_at = ? WHERE id = ?').run(at, at, id);
  db.close();
}

function completionRows(service: TestService): Array<{ id: string; store: number }> {
  const db = openDb(service);
  try {
    return db.prepare('SELECT id, store FROM chat_completions ORDER BY seq').all() as Array<{ id: string; store: number }>;
  } finally {
    db.close();
  }
}

async function create(service: TestService, body: object): Promise<{ completion: ChatCompletionObject; taskId: string }> {
  const response = await api(service, '/v1/chat/completions', { method: 'POST', json: { ...BODY, ...body } });
  assert.equal(response.status, 200);
  return { completion: (await response.json()) as ChatCompletionObject, taskId: response.headers.get('lmsp-task-id')! };
}

describe('retention of chat completions (LMSP 13, 10)', () => {
  test('the sweeper deletes an old stored completion with its task and events; a recent one stays', { timeout: 60_000 }, () =>
    withService({ args: ['--retention', '1h', '--sweep-interval', '300ms'] }, async (service) => {
      const old = await create(service, { store: true });
      const recent = await create(service, { store: true });
      backDate(service, [old.taskId], 2 * 3600);
      await waitFor(async () => (await api(service, `/v1/tasks/${old.taskId}`)).status === 404, { what: 'the periodic sweep' });
      assert.equal((await api(service, `/v1/chat/completions/${old.completion.id}`)).status, 404);
      assert.deepEqual(completionRows(service).map((row) => row.id), [recent.completion.id]);
      assert.equal((await api(service, `/v1/chat/completions/${recent.completion.id}`)).status, 200);
    }));

  test('store: false is never kept: deleted when answered, when a crash interrupted it, and by the sweep', { timeout: 90_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
      await create(service, {});
      await waitFor(() => completionRows(service).length === 0, { what: 'the answered ephemeral completion to go' });

      // Killed while running: recovery fails it (on_restart fail) and deletes it.
      const pending = api(service, '/v1/chat/completions', { method: 'POST', json: { ...BODY, max_completion_tokens: 2000 } }).catch(() => null);
      await waitFor(() => completionRows(service).length === 1, { what: 'the task to be stored' });
      await service.kill();
      await pending;
      // A finished one whose deletion the crash prevented: marked store = 0 behind the service's back.
      const kept = await (async () => {
        const restarted = await service.restart();
        assert.deepEqual(completionRows(restarted), [], 'recovery deleted the interrupted ephemeral completion');
        const stored = await create(restarted, { store: true });
        await restarted.kill();
        const db = openDb(restarted);
        db.prepare('UPDATE chat_completions SET store = 0 WHERE id = ?').run(stored.completion.id);
        db.close();
        return stored;
      })();
      const again = await service.restart();
      assert.deepEqual(completionRows(again), [], 'the startup sweep deleted the finished ephemeral completion');
      assert.equal((await api(again, `/v1/tasks/${kept.taskId}`)).status, 404);
    }));
});
