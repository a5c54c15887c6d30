import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { api, withService } from '../helpers/service.js';

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
