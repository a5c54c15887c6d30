import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { TaskEvent, TaskObject } from '../../src/api/types.js';
import { api, waitFor, withService } from '../helpers/service.js';
import { collectSse, readSse } from '../helpers/sse.js';

describe('Tasks API and event streams (LMSP 7.1, 7.3)', () => {
  test('list: own tasks, newest first, status filter and cursor pagination', () => withService({}, async (service) => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await service.client.createResponse({ model: 'lmsp-tiny', input: `t${i}`, max_output_tokens: 2 })).body.task.id);
    const page1 = await (await api(service, '/v1/tasks?limit=2')).json() as { object: string; data: TaskObject[]; has_more: boolean; last_id: string };
    assert.equal(page1.object, 'list');
    assert.deepEqual(page1.data.map((task) => task.id), [ids[4], ids[3]]);
    assert.equal(page1.has_more, true);
    assert.equal(page1.last_id, ids[3]);
    const page2 = await (await api(service, `/v1/tasks?limit=2&after=${page1.last_id}`)).json() as { data: TaskObject[] };
    assert.deepEqual(page2.data.map((task) => task.id), [ids[2], ids[1]]);
    const ascending = await (await api(service, '/v1/tasks?order=asc&limit=10')).json() as { data: TaskObject[]; has_more: boolean };
    assert.deepEqual(ascending.data.map((task) => task.id), ids);
    assert.equal(ascending.has_more, false);
    const completed = await (await api(service, '/v1/tasks?status=completed,failed')).json() as { data: TaskObject[] };
    assert.equal(completed.data.length, 5);
    const queued = await (await api(service, '/v1/tasks?status=queued')).json() as { data: TaskObject[] };
    assert.equal(queued.data.length, 0);
    const bad = await api(service, '/v1/tasks?status=sleeping');
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { param: string } }).error.param, 'status');
    // The kind filter (an lmsp extension), with the other filters and the cursor.
    const chat = await api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'c' }], max_tokens: 2, store: true } });
    assert.equal(chat.status, 200);
    const chatTask = chat.headers.get('lmsp-task-id');
    const chats = await (await api(service, '/v1/tasks?kind=chat_completion')).json() as { data: TaskObject[] };
    assert.deepEqual(chats.data.map((task) => task.id), [chatTask]);
    const responses = await (await api(service, `/v1/tasks?kind=response,model_pull&status=completed&limit=2&after=${ids[4]}`)).json() as { data: TaskObject[] };
    assert.deepEqual(responses.data.map((task) => task.id), [ids[3], ids[2]]);
    const both = await (await api(service, '/v1/tasks?kind=response,chat_completion&limit=10')).json() as { data: TaskObject[] };
    assert.equal(both.data.length, 6);
    const badKind = await api(service, '/v1/tasks?kind=poem');
    assert.equal(badKind.status, 400);
    assert.equal(((await badKind.json()) as { error: { param: string } }).error.param, 'kind');
  }));

  test('get: the task object with its fields', () => withService({}, async (service) => {
    const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 3 });
    const task = await service.client.getTask(created.body.task.id);
    assert.deepEqual(Object.keys(task).sort(), ['attempt', 'client_id', 'completion_id', 'created_at', 'error', 'finished_at', 'id', 'kind', 'last_sequence_number',
      'model', 'object', 'on_restart', 'response_id', 'started_at', 'status'].sort());
    assert.equal(task.object, 'task');
    assert.equal(task.kind, 'response');
    assert.equal(task.response_id, created.body.id);
    assert.equal(task.status, 'completed');
    assert.ok(task.finished_at! >= task.started_at!);
    assert.equal((await api(service, '/v1/tasks/task_doesnotexist')).status, 404);
  }));

  test('events as JSON pages: starting_after, limit, has_more; numbered 1..N without gaps', () => withService({}, async (service) => {
    const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 20 });
    const taskId = created.body.task.id;
    const all: TaskEvent[] = [];
    let after = 0;
    for (;;) {
      const page = await service.client.taskEvents(taskId, after, 3);
      all.push(...page.data);
      if (!page.has_more) break;
      after = page.data.at(-1)!.sequence_number;
    }
    assert.deepEqual(all.map((event) => event.sequence_number), Array.from({ length: all.length }, (_, i) => i + 1));
    assert.equal(all.length, (await service.client.getTask(taskId)).last_sequence_number);
    assert.equal(all[0]!.type, 'response.created');
    assert.ok(typeof all[0]!.created_at === 'number');
  }));

  test('events as SSE: id is the sequence number, Last-Event-ID resumes, the stream closes after the terminal event', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '5' } }, async (service) => {
      const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 60 });
      const taskId = created.body.task.id;
      // Follow live from the start, with the Accept header.
      const live = await collectSse(await api(service, `/v1/tasks/${taskId}/events`, { headers: { accept: 'text/event-stream' } }));
      assert.equal(live[0]!.id, '1');
      assert.equal(live.at(-1)!.event, 'response.incomplete');
      live.forEach((frame, index) => assert.equal(frame.id, String(index + 1)));
      // Reconnect as an EventSource would, naming the last event seen.
      const resumed = await collectSse(await api(service, `/v1/tasks/${taskId}/events?stream=true`, { headers: { 'last-event-id': '10' } }));
      assert.equal(resumed[0]!.id, '11');
      assert.deepEqual(resumed.map((frame) => frame.data), live.slice(10).map((frame) => frame.data));
      // After the terminal event there is nothing more to wait for.
      const finished = await collectSse(await api(service, `/v1/tasks/${taskId}/events?stream=true&starting_after=${live.length}`));
      assert.deepEqual(finished, []);
    }));

  test('Accept is read as HTTP defines it: media types in any case, q weights, and JSON without a preference', () => withService({}, async (service) => {
    const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 3 });
    const path = `/v1/tasks/${created.body.task.id}/events`;
    const cases: Array<[string | null, 'stream' | 'json']> = [
      ['text/event-stream', 'stream'],
      ['TEXT/Event-Stream', 'stream'],
      ['application/json;q=0.5, text/event-stream', 'stream'],
      ['text/event-stream, */*;q=0.1', 'stream'],
      ['text/event-stream;q=0.5, application/json', 'json'],
      ['application/json', 'json'],
      ['*/*', 'json'],
      ['text/html', 'json'],
      [null, 'json'],
    ];
    for (const [accept, expected] of cases) {
      const response = await api(service, path, accept === null ? {} : { headers: { accept } });
      assert.equal(response.status, 200);
      const type = response.headers.get('content-type') ?? '';
      assert.equal(type.startsWith('text/event-stream') ? 'stream' : type.startsWith('application/json') ? 'json' : type, expected, `Accept: ${accept}`);
      await response.arrayBuffer();
    }
  }));

  test('a live follower sees each commit as it happens', () => withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '100' } }, async (service) => {
    const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 8 });
    const response = await api(service, `/v1/tasks/${created.body.task.id}/events?stream=true`);
    const arrivals: number[] = [];
    for await (const frame of readSse(response)) if (frame.event === 'response.output_text.delta') arrivals.push(Date.now());
    assert.ok(arrivals.length >= 6, `deltas arrive one by one (${arrivals.length})`);
    const gaps = arrivals.slice(1).map((time, index) => time - arrivals[index]!);
    assert.ok(gaps.every((gap) => gap >= 40), `deltas are not held back and batched: gaps ${gaps.join(', ')} ms`);
  }));

  test('SSE sends a keep-alive comment every 15 s', { timeout: 40_000 }, () => withService({ env: { LMSP_DEBUG_LOAD_DELAY_MS: '20000' } }, async (service) => {
    const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 2 });
    const response = await api(service, `/v1/tasks/${created.body.task.id}/events?stream=true`);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const started = Date.now();
    while (!text.includes(': keep-alive')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    const elapsed = Date.now() - started;
    assert.ok(text.includes('\n: keep-alive\n\n') || text.startsWith(': keep-alive'), 'a comment line');
    assert.ok(elapsed >= 14_000 && elapsed < 17_000, `after about 15 s (${elapsed} ms)`);
    await reader.cancel();
  }));

  test('task cancel: 202 while running, 200 once cancelled, 409 when finished', () => withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
    const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 3000 });
    const taskId = created.body.task.id;
    await waitFor(async () => (await service.client.getTask(taskId)).status === 'running');
    const first = await api(service, `/v1/tasks/${taskId}/cancel`, { method: 'POST' });
    assert.equal(first.status, 202);
    assert.equal(((await first.json()) as TaskObject).status, 'cancelling');
    await waitFor(async () => (await service.client.getTask(taskId)).status === 'cancelled');
    assert.equal((await api(service, `/v1/tasks/${taskId}/cancel`, { method: 'POST' })).status, 200);
    const done = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
    assert.equal((await api(service, `/v1/tasks/${done.body.task.id}/cancel`, { method: 'POST' })).status, 409);
  }));
});
