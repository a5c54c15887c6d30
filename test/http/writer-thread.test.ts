/**
 * Creates written by the writer thread (src/store/writer.ts): answered only after their commit
 * (LMSP 11.2), readable at once on the connection that answers requests, run by the scheduler,
 * with the Idempotency-Key rules of LMSP 8 and the cap of LMSP 16 exact when concurrent creates
 * reach the thread together, while the runner writes its output on the other connection.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';
import { buildTestApp } from '../helpers/app.js';
import { withDataDir } from '../helpers/data-dir.js';
import { waitFor } from '../helpers/service.js';

interface Created {
  id: string;
  status: string;
  task: { id: string };
}

function create(app: FastifyInstance, token: string, body: object, key?: string) {
  return app.inject({
    method: 'POST',
    url: '/v1/responses',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
    payload: JSON.stringify({ model: 'lmsp-tiny', input: 'Say something.', ...body }),
  });
}

describe('the writer thread (LMSP 11.2, 8, 16)', () => {
  test('concurrent creates are committed by the thread, readable at once, and run to the end', { timeout: 120_000 }, () => withDataDir(async (dir) => {
    const { app, store, scheduler, operatorToken, close } = await buildTestApp(dir);
    try {
      scheduler.start();
      store.startWriter({ dataDir: dir, dbMaxPages: 0 });
      assert.equal(await store.whenWriterRunning(), true);
      const answers = await Promise.all(Array.from({ length: 24 }, (_, index) =>
        create(app, operatorToken, { background: true, max_output_tokens: 2, seed: index })));
      const created = answers.map((answer) => {
        assert.equal(answer.statusCode, 202, answer.body);
        return answer.json<Created>();
      });
      // Answered means committed: another connection sees every response and its task.
      const other = new BetterSqlite3(join(dir, 'lmsp.db'), { readonly: true });
      try {
        for (const response of created) {
          assert.ok(other.prepare('SELECT 1 FROM responses WHERE id = ?').get(response.id), response.id);
          assert.ok(other.prepare('SELECT 1 FROM tasks WHERE id = ?').get(response.task.id), response.task.id);
        }
      } finally {
        other.close();
      }
      // The thread wrote them (24 responses, tasks, events and counts), not the request thread's connection.
      assert.ok(store.totalChanges() - store.db.totalChanges() >= 24 * 3, 'the creates were written by the writer thread');
      for (const response of created) {
        const read = await app.inject({ method: 'GET', url: `/v1/responses/${response.id}`, headers: { authorization: `Bearer ${operatorToken}` } });
        assert.equal(read.statusCode, 200, read.body);
      }
      // The scheduler heard of each task after its commit and ran it; the runner's writes on the
      // request thread's connection and the thread's creates shared the write lock without an error.
      await waitFor(async () => {
        const statuses = await Promise.all(created.map(async (response) => (await app.inject({
          method: 'GET', url: `/v1/responses/${response.id}`, headers: { authorization: `Bearer ${operatorToken}` },
        })).json<Created>().status));
        return statuses.every((status) => status === 'completed' || status === 'incomplete');
      }, { timeoutMs: 90_000, what: 'every created response to finish' });
    } finally {
      await close();
    }
  }));

  test('one Idempotency-Key in one batch: replayed with the same body, 422 for another request, 409 while in flight', { timeout: 60_000 }, () => withDataDir(async (dir) => {
    const { app, store, operatorToken, close } = await buildTestApp(dir, { LMSP_DEBUG_LOAD_DELAY_MS: '600000' });
    try {
      store.startWriter({ dataDir: dir, dbMaxPages: 0 });
      await store.whenWriterRunning();
      const [first, second] = await Promise.all([
        create(app, operatorToken, { background: true }, 'same-key'),
        create(app, operatorToken, { background: true }, 'same-key'),
      ]);
      assert.equal(first.statusCode, 202, first.body);
      assert.equal(second.statusCode, 202, second.body);
      assert.equal(second.json<Created>().id, first.json<Created>().id, 'one response, replayed');
      const other = await create(app, operatorToken, { background: true, input: 'Something else.' }, 'same-key');
      assert.equal(other.statusCode, 422, other.body);
      assert.equal(other.json<{ error: { code: string } }>().error.code, 'idempotency_key_reused');
      const count = store.db.sqlite.prepare('SELECT count(*) AS n FROM responses').get() as { n: number };
      assert.equal(count.n, 1);

      // A plain create stays in flight until it is answered (its model does not load here).
      const plain = create(app, operatorToken, {}, 'plain-key');
      const inFlight = await waitFor(() => store.db.sqlite.prepare("SELECT task_id FROM idempotency_keys WHERE state = 'in_flight'").get() as { task_id: string } | undefined,
        { what: 'the key in flight' });
      const during = await create(app, operatorToken, {}, 'plain-key');
      assert.equal(during.statusCode, 409, during.body);
      assert.equal(during.json<{ error: { code: string } }>().error.code, 'idempotency_key_in_flight');
      const cancel = await app.inject({ method: 'POST', url: `/v1/tasks/${inFlight.task_id}/cancel`, headers: { authorization: `Bearer ${operatorToken}` } });
      assert.ok(cancel.statusCode === 200 || cancel.statusCode === 202, cancel.body);
      const answered = await plain;
      assert.equal(answered.statusCode, 200, answered.body);
      assert.equal(answered.json<Created>().status, 'cancelled');
    } finally {
      await close();
    }
  }));

  test('the cap on unfinished tasks holds exactly for creates committed together', { timeout: 60_000 }, () => withDataDir(async (dir) => {
    const { app, store, operatorToken, close } = await buildTestApp(dir, { LMSP_DEBUG_LOAD_DELAY_MS: '600000', LMSP_MAX_UNFINISHED_TASKS_PER_CLIENT: '3' });
    try {
      store.startWriter({ dataDir: dir, dbMaxPages: 0 });
      await store.whenWriterRunning();
      const answers = await Promise.all(Array.from({ length: 7 }, () => create(app, operatorToken, { background: true })));
      const statuses = answers.map((answer) => answer.statusCode).sort();
      assert.deepEqual(statuses, [202, 202, 202, 429, 429, 429, 429]);
      const refused = answers.find((answer) => answer.statusCode === 429)!;
      assert.equal(refused.json<{ error: { code: string } }>().error.code, 'too_many_tasks');
      assert.equal(refused.headers['retry-after'], '5');
      const count = store.db.sqlite.prepare('SELECT count(*) AS n FROM tasks').get() as { n: number };
      assert.equal(count.n, 3);
    } finally {
      await close();
    }
  }));
});
