import assert from 'node:assert/strict';
import { copyFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import type { ResponseObject } from '../../src/api/types.js';
import { api, waitFor, withService, type TestService } from '../helpers/service.js';

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

describe('a task whose next step the database could not record', () => {
  // The model takes 2 s to load; meanwhile another program holds the database, so the step from
  // loading to running cannot be written (busy past 5 s, as on a full disk) and the worker lets
  // the task go. Once the database can be written, the task is taken up again from there.
  async function leftLoading(service: TestService, model: string): Promise<string> {
    const created = (await (await api(service, '/v1/responses', { method: 'POST', json: { model, input: 'x', background: true, max_output_tokens: 4 } })).json()) as ResponseObject;
    await waitFor(async () => (await service.client.getTask(created.task.id)).status === 'loading', { what: 'the task loading' });
    const blocker = new BetterSqlite3(join(service.dataDir, 'lmsp.db'));
    blocker.exec('BEGIN IMMEDIATE');
    const seen = service.output().match(/cannot record task progress/g)?.length ?? 0;
    try {
      await waitFor(() => (service.output().match(/cannot record task progress/g)?.length ?? 0) > seen, { timeoutMs: 30_000, what: 'the step not recorded' });
    } finally {
      blocker.exec('ROLLBACK');
      blocker.close();
    }
    assert.equal((await service.client.getTask(created.task.id)).status, 'loading');
    return created.task.id;
  }

  test('left loading: it runs to its end once the database can be written; left loading and cancelled meanwhile: it ends cancelled', { timeout: 120_000 },
    () => withService({ env: { LMSP_DEBUG_LOAD_DELAY_MS: '2000', LMSP_LOG_LEVEL: 'info' } }, async (service) => {
      const loading = await leftLoading(service, 'lmsp-tiny');
      const finished = await waitFor(async () => {
        const task = await service.client.getTask(loading);
        return ['completed', 'failed', 'cancelled'].includes(task.status) ? task : null;
      }, { timeoutMs: 30_000, what: 'the task to finish' });
      assert.equal(finished.status, 'completed');
      const types = (await service.client.taskEvents(loading, 0, 100)).data.map((event) => event.type);
      assert.deepEqual(types.filter((type) => !type.endsWith('.delta')).slice(0, 3), ['response.created', 'response.loading', 'response.in_progress'], 'one loading event');

      // Another model, so that it loads again.
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'copy.gguf'));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'copy.gguf', id: 'copy' } })).status, 201);
      const cancelled = await leftLoading(service, 'copy');
      // Its file gone too: a cancel accepted ends the task cancelled, whatever loading it again would meet (LMSP 7.4).
      rmSync(join(service.dataDir, 'models', 'copy.gguf'));
      assert.equal((await api(service, `/v1/tasks/${cancelled}/cancel`, { method: 'POST' })).status, 202);
      await waitFor(async () => (await service.client.getTask(cancelled)).status === 'cancelled', { timeoutMs: 30_000, what: 'the cancel to be recorded' });
      const next = await service.client.createResponse({ model: 'lmsp-tiny', input: 'y', max_output_tokens: 3 });
      assert.equal(next.body.status, 'incomplete', 'the service goes on');
    }));
});

describe('a client that leaves while the database cannot be written', () => {
  test('its task is cancelled once the database can be written, and its key released, rather than running on for nobody', { timeout: 120_000 },
    () => withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20', LMSP_LOG_LEVEL: 'info' } }, async (service) => {
      const body = { model: 'lmsp-tiny', input: 'long', max_output_tokens: 3000 };
      const send = (signal: AbortSignal) => fetch(`${service.url}/v1/responses`, {
        method: 'POST', signal, body: JSON.stringify(body),
        headers: { authorization: `Bearer ${service.token}`, 'content-type': 'application/json', 'idempotency-key': 'leaving' },
      }).catch(() => null);
      const leaving = new AbortController();
      void send(leaving.signal);
      const task = await waitFor(async () => (await service.client.listTasks({ limit: 1 })).data.find((each) => each.status === 'running') ?? null, { what: 'the task running' });
      const blocker = new BetterSqlite3(join(service.dataDir, 'lmsp.db'));
      blocker.exec('BEGIN IMMEDIATE');
      try {
        leaving.abort();
        // The cancel cannot be written (busy past 5 s), nor can the generation's output.
        await waitFor(() => /cannot record task progress/.test(service.output()), { timeoutMs: 30_000, what: 'the database refusing writes' });
      } finally {
        blocker.exec('ROLLBACK');
        blocker.close();
      }
      const ended = await waitFor(async () => {
        const now = await service.client.getTask(task.id);
        return ['completed', 'failed', 'cancelled'].includes(now.status) ? now : null;
      }, { timeoutMs: 30_000, what: 'the task to end' });
      assert.equal(ended.status, 'cancelled');
      assert.ok(ended.last_sequence_number > 0);
      // The key was released: the same request is taken again, not refused as in flight.
      const again = new AbortController();
      const answer = await Promise.race([send(again.signal), new Promise((resolve) => setTimeout(() => resolve('taken'), 2000))]);
      again.abort();
      assert.equal(answer, 'taken', `the key is still in flight: ${answer instanceof Response ? answer.status : String(answer)}`);
    }));
});
