/**
 * Crash tests: the real service is killed with SIGKILL and started again on the same data
 * directory. Every cell of the LMSP 11.3 table is driven into its state first with the debug
 * delays of LMSP section 12.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { describe, test } from 'node:test';
import type { ResponseObject, TaskEvent, TaskObject } from '../../src/api/types.js';
import type { RestartPolicy } from '../../src/domain/tasks.js';
import { api, waitFor, withService, type TestService } from '../helpers/service.js';
import { readSse } from '../helpers/sse.js';

const POLICIES: RestartPolicy[] = ['fail', 'retry', 'resume'];
const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled']);

/** The event types of a task as they are on disk (read while the service is down). */
function typesOnDisk(dataDir: string, taskId: string): string[] {
  const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true });
  try {
    return (db.prepare('SELECT type FROM task_events WHERE task_id = ? ORDER BY sequence_number').all(taskId) as { type: string }[]).map((row) => row.type);
  } finally {
    db.close();
  }
}

async function events(service: TestService, taskId: string): Promise<TaskEvent[]> {
  return (await service.client.taskEvents(taskId, 0, 1000)).data;
}

/** LMSP 7.3: 1..N without gaps, last_sequence_number = N, one terminal event and it is the last. */
async function assertLogIntact(service: TestService, taskId: string): Promise<TaskEvent[]> {
  const log = await events(service, taskId);
  log.forEach((event, index) => assert.equal(event.sequence_number, index + 1, `task ${taskId}: sequence ${index + 1}`));
  const task = await service.client.getTask(taskId);
  assert.equal(task.last_sequence_number, log.length);
  const terminals = log.filter((event) => TERMINAL.has(event.type));
  if (['completed', 'failed', 'cancelled'].includes(task.status)) {
    assert.equal(terminals.length, 1, `task ${taskId}: one terminal event`);
    assert.equal(log.at(-1)!.type, terminals[0]!.type);
  } else {
    assert.equal(terminals.length, 0);
  }
  return log;
}

async function createFor(service: TestService, policy: RestartPolicy, maxTokens: number, input = `policy ${policy}`): Promise<ResponseObject> {
  const created = await service.client.createResponse({ model: 'lmsp-tiny', input, background: true, max_output_tokens: maxTokens, on_restart: policy, seed: 11 });
  assert.equal(created.status, 202);
  return created.body;
}

async function finalTask(service: TestService, taskId: string): Promise<TaskObject> {
  return waitFor(async () => {
    const task = await service.client.getTask(taskId);
    return ['completed', 'failed', 'cancelled'].includes(task.status) ? task : null;
  }, { timeoutMs: 30_000, what: `task ${taskId} to finish` });
}

async function statusOf(service: TestService, taskId: string): Promise<string> {
  return (await service.client.getTask(taskId)).status;
}

describe('recovery at startup after SIGKILL (LMSP 11.2, 11.3, 7.5)', () => {
  test('running and queued tasks, under each policy', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '25' }, args: ['--parallel', '3'] }, async (service) => {
      const running = new Map<RestartPolicy, ResponseObject>();
      for (const policy of POLICIES) running.set(policy, await createFor(service, policy, 400));
      await waitFor(async () => {
        for (const response of running.values()) {
          const current = await service.client.getResponse(response.id);
          if ((current.usage?.output_tokens ?? 0) < 5) return false;
        }
        return true;
      }, { what: 'three tasks running with output' });
      const queued = new Map<RestartPolicy, ResponseObject>();
      for (const policy of POLICIES) queued.set(policy, await createFor(service, policy, 10, `queued ${policy}`));
      for (const response of queued.values()) assert.equal(await statusOf(service, response.task.id), 'queued');
      await service.kill();
      const before = new Map<string, string[]>();
      for (const response of [...running.values(), ...queued.values()]) before.set(response.task.id, typesOnDisk(service.dataDir, response.task.id));

      const restarted = await service.restart({ env: {} });

      // running / fail -> failed with server_restarted and response.failed
      const failed = running.get('fail')!;
      const failedTask = await restarted.client.getTask(failed.task.id);
      assert.equal(failedTask.status, 'failed');
      assert.equal(failedTask.error?.code, 'server_restarted');
      const failedLog = await assertLogIntact(restarted, failed.task.id);
      assert.equal(failedLog.length, before.get(failed.task.id)!.length + 1);
      assert.equal(failedLog.at(-1)!.type, 'response.failed');

      // running / retry -> queued again, attempt 2, earlier output dropped; it then runs to the end
      const retried = running.get('retry')!;
      const retriedLog = await events(restarted, retried.task.id);
      const requeue = retriedLog[before.get(retried.task.id)!.length]!;
      assert.equal(requeue.type, 'response.queued');
      assert.equal((requeue.response as ResponseObject).task.attempt, 2);
      assert.deepEqual((requeue.response as ResponseObject).output, []);
      const retriedFinal = await finalTask(restarted, retried.task.id);
      assert.equal(retriedFinal.status, 'completed');
      assert.equal(retriedFinal.attempt, 2);
      const retriedResponse = await restarted.client.getResponse(retried.id);
      assert.equal(retriedResponse.usage?.output_tokens, 400, 'the new attempt generated everything again');
      const attempt2Deltas = (await assertLogIntact(restarted, retried.task.id))
        .filter((event) => event.sequence_number > requeue.sequence_number && event.type === 'response.output_text.delta')
        .map((event) => event.delta).join('');
      assert.equal(attempt2Deltas, retriedResponse.output[0]!.content[0]!.text);

      // running / resume -> running with response.resumed, then continues to the end
      const resumed = running.get('resume')!;
      const resumedLog = await events(restarted, resumed.task.id);
      const resumeEvent = resumedLog[before.get(resumed.task.id)!.length]!;
      assert.equal(resumeEvent.type, 'response.resumed');
      assert.equal(typeof resumeEvent.output_tokens, 'number');
      const resumedFinal = await finalTask(restarted, resumed.task.id);
      assert.equal(resumedFinal.status, 'completed');
      assert.equal(resumedFinal.attempt, 1);
      const resumedResponse = await restarted.client.getResponse(resumed.id);
      assert.equal(resumedResponse.usage?.output_tokens, 400);
      const allDeltas = (await assertLogIntact(restarted, resumed.task.id))
        .filter((event) => event.type === 'response.output_text.delta').map((event) => event.delta).join('');
      assert.equal(allDeltas, resumedResponse.output[0]!.content[0]!.text, 'nothing streamed was lost or repeated');

      // queued / fail -> failed; queued / retry and resume -> stay queued with no event, then run
      const queuedFail = queued.get('fail')!;
      assert.equal((await restarted.client.getTask(queuedFail.task.id)).status, 'failed');
      assert.equal((await assertLogIntact(restarted, queuedFail.task.id)).at(-1)!.type, 'response.failed');
      for (const policy of ['retry', 'resume'] as const) {
        const response = queued.get(policy)!;
        const log = await events(restarted, response.task.id);
        assert.deepEqual(log.slice(0, before.get(response.task.id)!.length + 1).map((event) => event.type).slice(0, 2),
          ['response.created', log[1]?.type === 'response.loading' ? 'response.loading' : 'response.in_progress'],
          'no response.queued for a task that was still queued');
        assert.ok(!log.some((event) => event.type === 'response.queued'));
        const final = await finalTask(restarted, response.task.id);
        assert.equal(final.status, 'completed');
        assert.equal(final.attempt, 1);
      }
    }));

  test('loading tasks, under each policy', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_LOAD_DELAY_MS: '60000' }, args: ['--parallel', '3'] }, async (service) => {
      const loading = new Map<RestartPolicy, ResponseObject>();
      for (const policy of POLICIES) loading.set(policy, await createFor(service, policy, 10));
      await waitFor(async () => {
        for (const response of loading.values()) if ((await statusOf(service, response.task.id)) !== 'loading') return false;
        return true;
      }, { what: 'three tasks loading' });
      await service.kill();
      const restarted = await service.restart({ env: {} });

      const failed = await restarted.client.getTask(loading.get('fail')!.task.id);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error?.code, 'server_restarted');
      for (const policy of ['retry', 'resume'] as const) {
        const response = loading.get(policy)!;
        const log = await events(restarted, response.task.id);
        assert.deepEqual(log.slice(0, 3).map((event) => event.type), ['response.created', 'response.loading', 'response.queued']);
        assert.equal((log[2]!.response as ResponseObject).task.attempt, policy === 'retry' ? 2 : 1);
        const final = await finalTask(restarted, response.task.id);
        assert.equal(final.status, 'completed');
        assert.equal(final.attempt, policy === 'retry' ? 2 : 1);
        await assertLogIntact(restarted, response.task.id);
      }
    }));

  test('a retried task shows nothing of its earlier attempt until the new one runs', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '25' } }, async (service) => {
      const created = await createFor(service, 'retry', 2000);
      await waitFor(async () => ((await service.client.getResponse(created.id)).usage?.output_tokens ?? 0) >= 5, { what: 'output' });
      await service.kill();
      // The new attempt stays loading: the same as a task that has not run yet (OpenAI: `output` []).
      const restarted = await service.restart({ env: { LMSP_DEBUG_LOAD_DELAY_MS: '60000' } });
      await waitFor(async () => (await statusOf(restarted, created.task.id)) === 'loading', { what: 'attempt 2 loading' });
      const response = await restarted.client.getResponse(created.id);
      assert.equal(response.status, 'in_progress');
      assert.deepEqual(response.output, []);
      assert.equal(response.usage, null);
      const task = await restarted.client.getTask(created.task.id);
      assert.equal(task.attempt, 2);
      assert.equal(task.started_at, null, 'the new attempt has not started');
      const log = await assertLogIntact(restarted, created.task.id);
      assert.deepEqual(log.slice(-2).map((event) => event.type), ['response.queued', 'response.loading']);
      for (const event of log.slice(-2)) assert.deepEqual((event.response as ResponseObject).output, []);
      await restarted.kill();
    }));

  test('cancelling tasks end cancelled under every policy', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_CANCEL_DELAY_MS: '60000', LMSP_DEBUG_TOKEN_DELAY_MS: '25' }, args: ['--parallel', '3'] }, async (service) => {
      const tasks = new Map<RestartPolicy, ResponseObject>();
      for (const policy of POLICIES) tasks.set(policy, await createFor(service, policy, 2000));
      for (const response of tasks.values()) {
        await waitFor(async () => (await statusOf(service, response.task.id)) === 'running');
        const cancel = await api(service, `/v1/responses/${response.id}/cancel`, { method: 'POST' });
        assert.equal(cancel.status, 202);
      }
      for (const response of tasks.values()) assert.equal(await statusOf(service, response.task.id), 'cancelling');
      await service.kill();
      const restarted = await service.restart({ env: {} });
      for (const response of tasks.values()) {
        assert.equal(await statusOf(restarted, response.task.id), 'cancelled');
        const log = await assertLogIntact(restarted, response.task.id);
        assert.equal(log.at(-1)!.type, 'response.cancelled');
        assert.equal(log.at(-2)!.type === 'response.cancelling' || log.at(-2)!.type === 'response.output_text.delta', true);
      }
    }));

  test('a 202 followed at once by SIGKILL is never lost', { timeout: 120_000 }, () => withService({}, async (service) => {
    for (let round = 0; round < 3; round++) {
      const accepted: string[] = [];
      let killed = false;
      const attempts = Array.from({ length: 40 }, (_, index) =>
        api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: `crash ${round}.${index}`, background: true, max_output_tokens: 5 } })
          .then(async (response) => {
            if (response.status !== 202) return;
            accepted.push(((await response.json()) as ResponseObject).id);
            if (accepted.length >= 10 && !killed) {
              killed = true;
              service.child.kill('SIGKILL');
            }
          })
          .catch(() => undefined));
      await Promise.all(attempts);
      await service.kill();
      assert.ok(accepted.length >= 10);
      service = await service.restart();
      for (const id of accepted) {
        const response = await api(service, `/v1/responses/${id}`);
        assert.equal(response.status, 200, `accepted response ${id} survives the crash`);
      }
    }
  }));

  test('max_restarts: a task interrupted more often than allowed fails with server_restarted', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '25' }, args: ['--max-restarts', '1'] }, async (service) => {
      const response = await createFor(service, 'resume', 3000);
      const runningWithMoreOutput = async (current: TestService, atLeast: number) => waitFor(async () => {
        const value = await current.client.getResponse(response.id);
        return value.task.status === 'running' && (value.usage?.output_tokens ?? 0) >= atLeast;
      }, { what: 'the task to make progress' });
      await runningWithMoreOutput(service, 3);
      await service.kill();
      service = await service.restart();
      assert.equal(await statusOf(service, response.task.id), 'running', 'the first restart resumes it');
      const tokensAfterFirst = (await service.client.getResponse(response.id)).usage?.output_tokens ?? 0;
      await runningWithMoreOutput(service, tokensAfterFirst + 3);
      await service.kill();
      service = await service.restart();
      const task = await service.client.getTask(response.task.id);
      assert.equal(task.status, 'failed');
      assert.equal(task.error?.code, 'server_restarted');
      await assertLogIntact(service, response.task.id);
    }));

  test('a stop (SIGTERM) is no disconnect: a streaming and a plain create are left to their policies, as after a crash', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, async (service) => {
      const post = (body: object) => api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', seed: 5, ...body } });
      const streamed = await post({ input: 'streamed', stream: true, on_restart: 'resume', max_output_tokens: 120 });
      assert.equal(streamed.status, 200);
      // The stream is read to its end (leaving it would be a disconnect); its first delta says the task runs.
      let responseId = '';
      let running: () => void = () => {};
      const firstDelta = new Promise<void>((resolve) => (running = resolve));
      const reading = (async () => {
        for await (const frame of readSse(streamed)) {
          responseId ||= (JSON.parse(frame.data) as { response?: { id: string } }).response?.id ?? '';
          if (frame.event === 'response.output_text.delta') running();
        }
      })().catch(() => undefined);
      await firstDelta;
      assert.match(responseId, /^resp_/);
      // A plain create waits behind it (one slot), then the service is stopped.
      const plain = post({ input: 'plain', on_restart: 'retry', max_output_tokens: 5, metadata: { which: 'plain' } }).catch(() => null);
      const streamTask = (await service.client.getResponse(responseId)).task.id;
      const plainTask = await waitFor(async () => (await service.client.listTasks({ limit: 10 })).data.find((task) => task.id !== streamTask)?.id, { what: 'the plain create' });
      await service.stop();
      assert.equal(await plain, null, 'the plain request ended with the service');
      await reading;
      for (const taskId of [streamTask, plainTask]) {
        const types = typesOnDisk(service.dataDir, taskId);
        assert.ok(!types.includes('response.cancelling') && !types.includes('response.cancelled'), `${taskId} was not cancelled by the stop: ${types.join(', ')}`);
      }
      const again = await service.restart();
      for (const taskId of [streamTask, plainTask]) {
        const task = await finalTask(again, taskId);
        assert.equal(task.status, 'completed', `${taskId} ran to its end after the restart`);
        const log = await assertLogIntact(again, taskId);
        assert.ok(!log.some((event) => event.type === 'response.cancelled'), `${taskId}: ${log.map((event) => event.type).join(', ')}`);
      }
      assert.ok((await events(again, streamTask)).some((event) => event.type === 'response.resumed'), 'the streamed one resumed');
    }));
});
