/**
 * LMSP section 16 (limits and fairness) and section 4 (revoking ends what a client holds open),
 * against the real service.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { api, errorOf, pairClient, waitFor, withService, type TestService } from '../helpers/service.js';

function taskCount(service: TestService): number {
  const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'), { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM tasks').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('limits and fairness (LMSP section 16)', () => {
  test('open event streams per client and in total: past them 429 too_many_streams, and a streaming create writes nothing', () =>
    withService({ args: ['--max-streams-per-client', '2', '--max-streams', '3'], env: { LMSP_DEBUG_TOKEN_DELAY_MS: '50' } }, async (service) => {
      const other = await pairClient(service, ['responses']);
      const long = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 4000 });
      const path = `/v1/responses/${long.body.id}?stream=true`;
      const controllers: AbortController[] = [];
      const open = async (token: string) => {
        const controller = new AbortController();
        const response = await fetch(service.url + path, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
        if (response.status === 200) controllers.push(controller);
        return response;
      };
      assert.equal((await open(service.token)).status, 200);
      assert.equal((await open(service.token)).status, 200);
      const third = await open(service.token);
      assert.equal(third.status, 429, 'a third stream of one client');
      assert.equal((await errorOf(third)).code, 'too_many_streams');
      assert.ok(Number(third.headers.get('retry-after')) >= 1, 'with Retry-After');
      // The task is the operator's: the other client opens its own task's stream.
      const own = await other.client.createResponse({ model: 'lmsp-tiny', input: 'y', background: true, max_output_tokens: 4000 });
      const otherStream = await fetch(`${service.url}/v1/responses/${own.body.id}?stream=true`, { headers: { authorization: `Bearer ${other.token}` } });
      assert.equal(otherStream.status, 200, 'another client still has room');
      const beyondTotal = await fetch(`${service.url}/v1/responses/${own.body.id}?stream=true`, { headers: { authorization: `Bearer ${other.token}` } });
      assert.equal(beyondTotal.status, 429, 'the service holds --max-streams already');
      const before = taskCount(service);
      const streamingCreate = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'z', stream: true, max_output_tokens: 5 } });
      assert.equal(streamingCreate.status, 429);
      assert.equal(taskCount(service), before, 'a refused streaming create leaves nothing behind');
      // Closing a stream gives its place back.
      controllers.shift()!.abort();
      await waitFor(async () => (await open(service.token)).status === 200, { what: 'a place after a stream closed' });
      for (const controller of controllers) controller.abort();
      await otherStream.body?.cancel();
    }));

  test('unfinished tasks per client: past them 429 too_many_tasks with Retry-After, nothing written, others unaffected', () =>
    withService({ args: ['--max-unfinished-tasks-per-client', '3'], env: { LMSP_DEBUG_LOAD_DELAY_MS: '60000' } }, async (service) => {
      for (let i = 0; i < 3; i++) {
        assert.equal((await service.client.createResponse({ model: 'lmsp-tiny', input: `t${i}`, background: true, max_output_tokens: 2 })).status, 202);
      }
      const before = taskCount(service);
      const refused = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'one more', background: true } });
      assert.equal(refused.status, 429);
      assert.equal((await errorOf(refused)).code, 'too_many_tasks');
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      assert.equal(taskCount(service), before);
      const other = await pairClient(service, ['responses']);
      assert.equal((await other.client.createResponse({ model: 'lmsp-tiny', input: 'mine', background: true, max_output_tokens: 2 })).status, 202);
    }));

  test('round robin between clients: one client\'s long queue does not starve another (--parallel 1)', () =>
    // 30 tokens of 100 ms: each task holds the only slot for about 3 s, so the moment the patient
    // client's task leaves the queue is seen long before the next task could start.
    withService({ args: ['--parallel', '1'], env: { LMSP_DEBUG_TOKEN_DELAY_MS: '100' } }, async (service) => {
      const greedy = await pairClient(service, ['responses'], 'greedy');
      const patient = await pairClient(service, ['responses'], 'patient');
      const greedyTasks: string[] = [];
      for (let i = 0; i < 6; i++) {
        greedyTasks.push((await greedy.client.createResponse({ model: 'lmsp-tiny', input: `g${i}`, background: true, max_output_tokens: 30 })).body.task.id);
      }
      const patientTask = (await patient.client.createResponse({ model: 'lmsp-tiny', input: 'p', background: true, max_output_tokens: 30 })).body.task.id;
      await waitFor(async () => ((await service.client.getTask(patientTask)).status === 'queued' ? null : true),
        { timeoutMs: 60_000, intervalMs: 50, what: 'the patient client\'s task to start' });
      const greedyStates = await Promise.all(greedyTasks.map((id) => service.client.getTask(id)));
      // The first greedy task held the only slot when the patient one arrived; the patient one
      // came next, before any of the greedy client's other five.
      assert.equal(greedyStates[0]!.status, 'completed');
      assert.deepEqual(greedyStates.slice(1).map((task) => task.status), ['queued', 'queued', 'queued', 'queued', 'queued']);
    }));
});

describe('revoking a client (LMSP section 4)', () => {
  test('ends its open streams and cancels its connection-bound tasks; background tasks go on', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' }, args: ['--parallel', '3'] }, async (service) => {
      const victim = await pairClient(service, ['responses'], 'victim');
      const auth = { authorization: `Bearer ${victim.token}`, 'content-type': 'application/json' };
      const background = await victim.client.createResponse({ model: 'lmsp-tiny', input: 'b', background: true, max_output_tokens: 200 });
      const follow = await fetch(`${service.url}/v1/responses/${background.body.id}?stream=true`, { headers: auth });
      const streamed = await fetch(`${service.url}/v1/responses`, { method: 'POST', headers: auth,
        body: JSON.stringify({ model: 'lmsp-tiny', input: 's', stream: true, max_output_tokens: 4000 }) });
      const plain = fetch(`${service.url}/v1/responses`, { method: 'POST', headers: auth,
        body: JSON.stringify({ model: 'lmsp-tiny', input: 'p', max_output_tokens: 4000 }) }).catch((error: Error) => error);
      const reading = Promise.all([follow, streamed].map(async (response) => {
        const reader = response.body!.getReader();
        try {
          for (;;) if ((await reader.read()).done) return 'ended';
        } catch {
          return 'cut';
        }
      }));
      const listed = await waitFor(async () => {
        const tasks = (await service.client.listTasks({ status: ['running', 'queued', 'loading'] })).data.filter((task) => task.client_id === victim.id);
        return tasks.length === 3 ? tasks : null;
      }, { what: 'the victim\'s three tasks' });
      assert.equal((await api(service, `/v1/clients/${victim.id}`, { method: 'DELETE' })).status, 200);
      // The follower's stream ends as a response ends (not a dropped connection); the streaming
      // create is cut, as a disconnect would cut it, and its task is cancelled.
      assert.deepEqual(await reading, ['ended', 'cut'], 'both streams end');
      assert.ok((await plain) instanceof Error || (await plain as Response).status !== 200, 'the plain request ends without an answer');
      const final = await waitFor(async () => {
        const tasks = await Promise.all(listed.map((task) => service.client.getTask(task.id)));
        return tasks.every((task) => task.id === background.body.task.id || task.finished_at !== null) ? tasks : null;
      }, { what: 'the connection-bound tasks to end' });
      for (const task of final) {
        if (task.id === background.body.task.id) assert.notEqual(task.status, 'cancelled', 'the background task goes on');
        else assert.equal(task.status, 'cancelled', `${task.id} was tied to a connection`);
      }
      assert.equal(((await victim.client.me().catch((error: unknown) => error)) as { status?: number }).status, 401, 'the token is dead');
    }));
});
