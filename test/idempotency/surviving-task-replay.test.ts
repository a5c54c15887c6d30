/**
 * A plain or streaming create whose process was killed while its task was generating, under a
 * restart policy that lets the task go on (LMSP 7.5): the Idempotency-Key stays with that task,
 * so a retry with it follows the task instead of making a second one (LMSP 8).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import type { ChatCompletionObject } from '../../src/api/chat-completions.js';
import type { ResponseObject } from '../../src/api/types.js';
import { api, waitFor, withService, type TestService } from '../helpers/service.js';
import { collectSse, readSse } from '../helpers/sse.js';

const SLOW = { LMSP_DEBUG_TOKEN_DELAY_MS: '40' };

function post(service: TestService, path: string, key: string, body: object): Promise<Response> {
  return api(service, path, { method: 'POST', json: body, headers: { 'idempotency-key': key } });
}

async function taskIds(service: TestService): Promise<string[]> {
  return (await service.client.listTasks({ limit: 1000 })).data.map((task) => task.id);
}

/** Reads `frames` frames of a streaming create, then kills the service under it. */
async function killAfterFrames(service: TestService, response: Response, frames: number): Promise<void> {
  let read = 0;
  try {
    for await (const frame of readSse(response)) {
      void frame;
      if (++read === frames) await service.kill();
    }
  } catch {
    // The connection dies with the process.
  }
  assert.ok(read >= frames, `read ${read} frames before the kill`);
}

describe('Idempotency-Key of a create killed while its task goes on (LMSP 8, 7.5)', () => {
  test('a plain response under resume: the retry waits for that task and answers its response, replayed', { timeout: 90_000 }, () =>
    withService({ env: SLOW }, async (service) => {
      const body = { model: 'lmsp-tiny', input: 'keep going', max_output_tokens: 30, temperature: 0, on_restart: 'resume' };
      void post(service, '/v1/responses', 'plain', body).catch(() => undefined);
      const [taskId] = await waitFor(async () => {
        const running = (await service.client.listTasks({ status: ['running'] })).data;
        return running.length === 1 && running[0]!.last_sequence_number > 6 ? [running[0]!.id] : null;
      }, { what: 'the task to be generating' });
      await service.kill();
      const restarted = await service.restart();
      const retry = await post(restarted, '/v1/responses', 'plain', body);
      assert.equal(retry.status, 200);
      assert.equal(retry.headers.get('idempotent-replayed'), 'true');
      const response = (await retry.json()) as ResponseObject;
      assert.equal(response.task.id, taskId, 'the task the first request made');
      assert.equal(response.status, 'incomplete', 'answered once finished, as the create would have');
      assert.deepEqual(await taskIds(restarted), [taskId], 'no second task');
    }));

  test('a streaming response under retry: the retry streams that task\'s events from the first, replayed', { timeout: 90_000 }, () =>
    withService({ env: SLOW }, async (service) => {
      const body = { model: 'lmsp-tiny', input: 'stream on', stream: true, max_output_tokens: 30, temperature: 0, on_restart: 'retry' };
      await killAfterFrames(service, await post(service, '/v1/responses', 'streamed', body), 10);
      const restarted = await service.restart();
      const [taskId] = await taskIds(restarted);
      const retry = await post(restarted, '/v1/responses', 'streamed', body);
      assert.equal(retry.status, 200);
      assert.equal(retry.headers.get('idempotent-replayed'), 'true');
      const events = (await collectSse(retry)).map((frame) => JSON.parse(frame.data) as { sequence_number: number; type: string; response?: ResponseObject });
      events.forEach((event, index) => assert.equal(event.sequence_number, index + 1));
      assert.equal(events[0]!.response!.task.id, taskId);
      assert.ok(events.some((event) => event.type === 'response.queued'), 'the log of the task that went on');
      assert.equal(events.at(-1)!.type, 'response.incomplete');
      assert.deepEqual(await taskIds(restarted), [taskId], 'no second task');
    }));

  test('chat completions, streamed and plain, under resume: each retry follows its own task', { timeout: 90_000 }, () =>
    withService({ env: SLOW }, async (service) => {
      const body = { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 30, temperature: 0, on_restart: 'resume' };
      const streamed = await post(service, '/v1/chat/completions', 'chat-stream', { ...body, stream: true });
      const streamedTask = streamed.headers.get('lmsp-task-id');
      // The plain one is queued behind the streamed one or generating beside it when the process dies.
      void post(service, '/v1/chat/completions', 'chat-plain', body).catch(() => undefined);
      await waitFor(async () => (await taskIds(service)).length === 2, { what: 'the plain create to be committed' });
      await killAfterFrames(service, streamed, 8);
      const restarted = await service.restart();
      const before = (await taskIds(restarted)).sort();
      assert.equal(before.length, 2);

      const plain = await post(restarted, '/v1/chat/completions', 'chat-plain', body);
      assert.equal(plain.status, 200);
      assert.equal(plain.headers.get('idempotent-replayed'), 'true');
      assert.ok(before.includes(plain.headers.get('lmsp-task-id')!));
      assert.notEqual(plain.headers.get('lmsp-task-id'), streamedTask);
      const completion = (await plain.json()) as { object: string; choices: Array<{ finish_reason: string }> };
      assert.equal(completion.object, 'chat.completion');
      assert.equal(completion.choices[0]!.finish_reason, 'length');

      const again = await post(restarted, '/v1/chat/completions', 'chat-stream', { ...body, stream: true });
      assert.equal(again.status, 200);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(again.headers.get('lmsp-task-id'), streamedTask);
      const frames = await collectSse(again);
      assert.equal(frames.at(-1)!.data, '[DONE]');
      // Chat completions are `store: false` by default: once finished, both are deleted (LMSP 13),
      // as their requests would have deleted them, and no task was made in their place.
      await waitFor(async () => (await taskIds(restarted)).length === 0, { what: 'the store: false completions to be deleted once finished' });
      for (const id of before) assert.equal((await api(restarted, `/v1/tasks/${id}`)).status, 404);
    }));

  test('a store: false streamed response under resume is deleted as soon as it finishes; its key replays the whole stream', { timeout: 90_000 }, () =>
    withService({ env: SLOW, args: ['--sweep-interval', '1h'] }, async (service) => {
      const body = { model: 'lmsp-tiny', input: 'do not keep', stream: true, store: false, max_output_tokens: 30, temperature: 0, on_restart: 'resume' };
      await killAfterFrames(service, await post(service, '/v1/responses', 'unstored', body), 10);
      const restarted = await service.restart();
      const [taskId] = await taskIds(restarted);
      assert.ok(taskId, 'the task survived the crash');
      // No request waits for it any more; it is still deleted when it finishes, not at the next sweep.
      await waitFor(async () => (await api(restarted, `/v1/tasks/${taskId}`)).status === 404, { timeoutMs: 30_000, what: 'the task to be deleted once finished' });
      assert.deepEqual(await taskIds(restarted), []);
      const retry = await post(restarted, '/v1/responses', 'unstored', body);
      assert.equal(retry.status, 200);
      assert.equal(retry.headers.get('idempotent-replayed'), 'true');
      const events = (await collectSse(retry)).map((frame) => JSON.parse(frame.data) as { sequence_number: number; type: string; response?: ResponseObject });
      events.forEach((event, index) => assert.equal(event.sequence_number, index + 1));
      assert.equal(events[0]!.response!.task.id, taskId);
      assert.ok(events.some((event) => event.type === 'response.resumed'), 'the log of the task that went on');
      assert.equal(events.at(-1)!.type, 'response.incomplete');
      assert.deepEqual(await taskIds(restarted), [], 'no second task');
    }));

  test('a request that died after its task completed, before it answered: the retry gets that answer, no second task', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const chat = { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 12, seed: 4, store: true };
      const response = { model: 'lmsp-tiny', input: 'hi', max_output_tokens: 12, seed: 4 };
      const chatFirst = await post(service, '/v1/chat/completions', 'chat-done', chat);
      assert.equal(chatFirst.status, 200);
      const completion = (await chatFirst.json()) as ChatCompletionObject;
      const responseFirst = await post(service, '/v1/responses', 'response-done', response);
      assert.equal(responseFirst.status, 200);
      const answered = (await responseFirst.json()) as ResponseObject;
      const before = await taskIds(service);
      await service.kill();
      // What a crash leaves in the moment between the task's last commit and the request's answer
      // (crafted, as the window is a few milliseconds): the keys still in flight.
      const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'));
      const inFlight = db.prepare("UPDATE idempotency_keys SET state = 'in_flight', status_code = NULL, body = NULL WHERE task_id IS NOT NULL").run();
      db.close();
      assert.equal(inFlight.changes, 2);
      const restarted = await service.restart();
      const chatRetry = await post(restarted, '/v1/chat/completions', 'chat-done', chat);
      assert.equal(chatRetry.status, 200);
      assert.equal(chatRetry.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(await chatRetry.json(), completion);
      const responseRetry = await post(restarted, '/v1/responses', 'response-done', response);
      assert.equal(responseRetry.status, 200);
      assert.equal(responseRetry.headers.get('idempotent-replayed'), 'true');
      const replayed = (await responseRetry.json()) as ResponseObject;
      assert.equal(replayed.id, answered.id);
      assert.deepEqual(replayed.output, answered.output);
      assert.deepEqual(await taskIds(restarted), before, 'no second task');
    }));

  test('store: false plain creates that a second crash ends (max_restarts): their keys answer as the creates would have', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '60' }, args: ['--max-restarts', '1', '--parallel', '2', '--sweep-interval', '1h'] }, async (service) => {
      const chat = { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 200, store: false, on_restart: 'resume' };
      const response = { model: 'lmsp-tiny', input: 'hi', max_output_tokens: 200, store: false, on_restart: 'resume' };
      const bothRunning = async (running: TestService) => waitFor(async () => {
        const tasks = (await running.client.listTasks({ status: ['running'] })).data;
        return tasks.length === 2 && tasks.every((task) => task.last_sequence_number > 4) ? tasks.map((task) => task.id) : null;
      }, { what: 'both tasks to be generating' });
      void post(service, '/v1/chat/completions', 'chat-twice', chat).catch(() => undefined);
      void post(service, '/v1/responses', 'response-twice', response).catch(() => undefined);
      const ids = await bothRunning(service);
      await service.kill();
      // The first restart resumes both, and their keys now wait for them (their requests died).
      const once = await service.restart();
      assert.deepEqual((await bothRunning(once)).sort(), [...ids].sort());
      await once.kill();
      // The second is one more than --max-restarts: both fail, and, store: false, are deleted.
      const twice = await once.restart();
      assert.deepEqual(await taskIds(twice), [], 'both deleted once failed');
      const chatRetry = await post(twice, '/v1/chat/completions', 'chat-twice', chat);
      const chatError = (await chatRetry.json()) as { error: { code: string; message: string } };
      assert.equal(chatRetry.status, 500, JSON.stringify(chatError));
      assert.equal(chatRetry.headers.get('idempotent-replayed'), 'true');
      assert.equal(chatError.error.code, 'task_failed');
      assert.match(chatError.error.message, /^server_restarted:/);
      const responseRetry = await post(twice, '/v1/responses', 'response-twice', response);
      assert.equal(responseRetry.status, 200);
      assert.equal(responseRetry.headers.get('idempotent-replayed'), 'true');
      const failed = (await responseRetry.json()) as ResponseObject;
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error?.code, 'server_restarted');
      assert.ok(ids.includes(failed.task.id));
      assert.deepEqual(await taskIds(twice), [], 'no second task');
    }));
  test('stored plain creates that outlived their requests, queued or resumed: their keys keep the final answer after a DELETE, as without a crash', { timeout: 120_000 }, () =>
    withService({ env: SLOW, args: ['--parallel', '1', '--sweep-interval', '1h'] }, async (service) => {
      const response = { model: 'lmsp-tiny', input: 'keep me', max_output_tokens: 30, seed: 3, on_restart: 'resume' };
      const chat = { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'keep me too' }], max_completion_tokens: 20, seed: 3, store: true, on_restart: 'resume' };
      void post(service, '/v1/responses', 'stored-running', response).catch(() => undefined);
      await waitFor(async () => {
        const running = (await service.client.listTasks({ status: ['running'] })).data;
        return running.length === 1 && running[0]!.last_sequence_number > 6 ? true : null;
      }, { what: 'the response to be generating' });
      // One slot: the chat completion waits in the queue behind it when the process dies.
      void post(service, '/v1/chat/completions', 'stored-queued', chat).catch(() => undefined);
      await waitFor(async () => ((await service.client.listTasks({ status: ['queued'] })).data.length === 1 ? true : null), { what: 'the chat completion to be queued' });
      await service.kill();
      const restarted = await service.restart();
      // Nobody retries until both are finished and deleted: the keys alone must hold the answers.
      await waitFor(async () => ((await restarted.client.listTasks({ status: ['queued', 'loading', 'running'] })).data.length === 0 ? true : null),
        { timeoutMs: 60_000, what: 'both tasks to finish' });
      const tasks = (await restarted.client.listTasks({ limit: 10 })).data;
      assert.equal(tasks.length, 2);
      const responseTask = tasks.find((task) => task.response_id !== null)!;
      const completionTask = tasks.find((task) => task.response_id === null)!;
      const finished = await restarted.client.getResponse(responseTask.response_id!);
      const stored = await api(restarted, `/v1/chat/completions/${completionTask.completion_id}`);
      assert.equal(stored.status, 200);
      const completion = (await stored.json()) as ChatCompletionObject;
      assert.equal((await api(restarted, `/v1/responses/${finished.id}`, { method: 'DELETE' })).status, 200);
      assert.equal((await api(restarted, `/v1/chat/completions/${completion.id}`, { method: 'DELETE' })).status, 200);

      const responseRetry = await post(restarted, '/v1/responses', 'stored-running', response);
      assert.equal(responseRetry.status, 200, 'the answer the create would have given, kept under its key');
      assert.equal(responseRetry.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(await responseRetry.json(), finished);
      const chatRetry = await post(restarted, '/v1/chat/completions', 'stored-queued', chat);
      assert.equal(chatRetry.status, 200);
      assert.equal(chatRetry.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(await chatRetry.json(), completion);
      assert.deepEqual(await taskIds(restarted), [], 'no new task');
    }));
});
