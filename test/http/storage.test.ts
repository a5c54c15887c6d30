import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { api, waitFor, withService } from '../helpers/service.js';

describe('storage unavailable (LMSP section 9)', () => {
  test('a locked database answers 503 storage_unavailable and the request does nothing', { timeout: 60_000 }, () => withService({}, async (service) => {
    const path = join(service.dataDir, 'lmsp.db');
    const before = await service.client.listTasks({ limit: 100 });
    const blocker = new BetterSqlite3(path);
    blocker.exec('BEGIN EXCLUSIVE');
    try {
      const response = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', background: true } });
      assert.equal(response.status, 503);
      const body = (await response.json()) as { error: { code: string; type: string } };
      assert.equal(body.error.code, 'storage_unavailable');
      assert.equal(body.error.type, 'server_error');
    } finally {
      blocker.exec('ROLLBACK');
      blocker.close();
    }
    const after = await service.client.listTasks({ limit: 100 });
    assert.deepEqual(after.data.map((task) => task.id), before.data.map((task) => task.id), 'nothing half-written');
    const ok = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', background: true } });
    assert.equal(ok.status, 202, 'the service recovers as soon as the database can be written again');
  }));
});

describe('a full disk during generation', () => {
  test('answers 503, keeps what was committed, and pauses work instead of regenerating in a loop', { timeout: 90_000 }, () => withService({}, async (first) => {
    await first.client.createResponse({ model: 'lmsp-tiny', input: 'before', max_output_tokens: 3 });
    await first.stop();
    const db = new BetterSqlite3(join(first.dataDir, 'lmsp.db'));
    const pages = Number(db.pragma('page_count', { simple: true }));
    db.close();
    // Room for a hundred or so tokens' events, then the database is full.
    const service = await first.restart({ env: { LMSP_DEBUG_DB_MAX_PAGES: String(pages + 8), LMSP_LOG_LEVEL: 'info' } });
    const before = (await service.client.listTasks()).data.map((task) => task.id);
    const created = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'fill it', background: true, max_output_tokens: 16000, on_restart: 'resume' } });
    assert.equal(created.status, 202);
    await waitFor(() => /cannot record task progress/.test(service.output()), { timeoutMs: 30_000, what: 'the database to fill up' });
    const refused = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', background: true } });
    assert.equal(refused.status, 503);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'storage_unavailable');
    const resumedBefore = service.output().match(/resuming task/g)?.length ?? 0;
    await new Promise((resolve) => setTimeout(resolve, 3500));
    const attempts = (service.output().match(/resuming task/g)?.length ?? 0) - resumedBefore;
    assert.ok(attempts <= 2, `the task was resumed ${attempts} times in 3.5 s while the disk was full: it must back off`);
    const after = (await service.client.listTasks({ limit: 100 })).data.map((task) => task.id);
    for (const id of before) assert.ok(after.includes(id), 'nothing committed is lost');
  }));
});
