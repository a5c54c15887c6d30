import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { join } from 'node:path';
import type { InputItemList, InputMessageObject, ResponseObject, TaskEvent } from '../../src/api/types.js';
import { api, waitFor, withService, type TestService } from '../helpers/service.js';
import { collectSse, readSse } from '../helpers/sse.js';

const OPENAI_ORDER = [
  'response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
];

async function json<T>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

function countRows(service: TestService, table: string): number {
  const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'), { readonly: true });
  try {
    return (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  } finally {
    db.close();
  }
}

/** Opens a streamed create, reads it up to the first delta, then drops the connection; the response id. */
async function streamThenLeave(service: TestService, body: object): Promise<{ status: number; responseId: string }> {
  const controller = new AbortController();
  const response = await api(service, '/v1/responses', { method: 'POST', json: body, signal: controller.signal });
  let responseId = '';
  for await (const frame of readSse(response)) {
    const event = JSON.parse(frame.data) as TaskEvent;
    if (event.type === 'response.created') responseId = (event.response as ResponseObject).id;
    if (event.type === 'response.output_text.delta') break;
  }
  controller.abort();
  return { status: response.status, responseId };
}

function assertEventOrder(types: string[], terminal: string): void {
  const withoutLoading = types.filter((type) => type !== 'response.loading');
  assert.deepEqual(withoutLoading.slice(0, 4), OPENAI_ORDER);
  const deltas = withoutLoading.slice(4).filter((type) => type === 'response.output_text.delta');
  assert.ok(deltas.length > 0, 'at least one delta');
  assert.deepEqual(withoutLoading.slice(4 + deltas.length), [
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done', terminal,
  ]);
}

describe('Responses API (LMSP section 6)', () => {
  test('plain request waits and answers 200 with the finished response', () => withService({}, async (service) => {
    const response = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'Hello', max_output_tokens: 12, seed: 1 } });
    assert.equal(response.status, 200);
    const body = await json<ResponseObject>(response);
    assert.equal(body.object, 'response');
    assert.equal(body.status, 'incomplete', 'lmsp-tiny never stops early, so max_output_tokens ends it');
    assert.deepEqual(body.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(body.usage?.output_tokens, 12);
    assert.equal(body.output.length, 1);
    assert.equal(body.output[0]!.role, 'assistant');
    assert.ok(body.output[0]!.content[0]!.text.length > 0);
    assert.equal(body.task.status, 'completed');
    assert.equal(body.task.on_restart, 'fail', 'non-background requests fail on restart by default');
    assert.match(body.id, /^resp_[0-9A-Za-z]{24,}$/);
    assert.match(body.task.id, /^task_[0-9A-Za-z]{24,}$/);
  }));

  test('background: 202 with Location, the task already on disk, then it completes', () => withService({}, async (service) => {
    const response = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'Hello', background: true, max_output_tokens: 8 } });
    assert.equal(response.status, 202);
    const body = await json<ResponseObject>(response);
    assert.equal(body.completed_at, null);
    assert.equal(response.headers.get('location'), `/v1/responses/${body.id}`);
    assert.equal(body.status, 'queued');
    assert.equal(body.background, true);
    assert.equal(body.task.on_restart, 'resume');
    assert.equal(typeof body.seed, 'number', 'the service picks and records a seed');
    // LMSP 11.2: persisted before the 202.
    const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'), { readonly: true });
    assert.ok(db.prepare('SELECT 1 FROM tasks WHERE response_id = ?').get(body.id));
    db.close();
    const finished = await waitFor(async () => {
      const current = await service.client.getResponse(body.id);
      return current.status === 'incomplete' ? current : null;
    });
    assert.equal(finished.output[0]!.content[0]!.text.length > 0, true);
  }));

  test('stream: events in the OpenAI order, numbered from 1, deltas concatenating to the text', () => withService({}, async (service) => {
    const response = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'Hello', stream: true, max_output_tokens: 30, seed: 5 } });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const frames = await collectSse(response);
    const events = frames.map((frame) => JSON.parse(frame.data) as TaskEvent);
    events.forEach((event, index) => {
      assert.equal(event.sequence_number, index + 1);
      assert.equal(frames[index]!.id, String(index + 1));
      assert.equal(frames[index]!.event, event.type);
    });
    assertEventOrder(events.map((event) => event.type), 'response.incomplete');
    const deltas = events.filter((event) => event.type === 'response.output_text.delta').map((event) => event.delta as string).join('');
    const done = events.find((event) => event.type === 'response.output_text.done')!;
    assert.equal(deltas, done.text);
    const final = events.at(-1)!.response as ResponseObject;
    assert.equal(final.output[0]!.content[0]!.text, deltas);
  }));

  test('background + stream: 200 event stream, and the task goes on when the client leaves', () => withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
    const { status, responseId } = await streamThenLeave(service, { model: 'lmsp-tiny', input: 'Hi', stream: true, background: true, max_output_tokens: 40 });
    assert.equal(status, 200);
    const finished = await waitFor(async () => {
      const current = await service.client.getResponse(responseId);
      return current.task.status === 'completed' ? current : null;
    });
    assert.equal(finished.usage?.output_tokens, 40, 'the whole generation ran after the client left');
  }));

  test('stream without background: a client that disconnects cancels the task', () => withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
    const { responseId } = await streamThenLeave(service, { model: 'lmsp-tiny', input: 'Hi', stream: true, max_output_tokens: 2000 });
    const cancelled = await waitFor(async () => {
      const current = await service.client.getResponse(responseId);
      return current.status === 'cancelled' ? current : null;
    });
    assert.ok((cancelled.usage?.output_tokens ?? 0) < 2000);
  }));

  test('plain request: a client that disconnects cancels the task', () => withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
    const controller = new AbortController();
    const pending = api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'Hi', max_output_tokens: 2000 }, signal: controller.signal })
      .catch(() => null);
    const task = await waitFor(async () => (await service.client.listTasks({ status: ['running'] })).data[0]);
    controller.abort();
    await pending;
    const final = await waitFor(async () => {
      const current = await service.client.getTask(task.id);
      return current.status === 'cancelled' ? current : null;
    });
    assert.equal(final.status, 'cancelled');
  }));

  test('GET ?stream=true&starting_after=N replays the log after N, then ends after the terminal event', () => withService({}, async (service) => {
    const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'Hi', max_output_tokens: 10 });
    const id = created.body.id;
    const all = await collectSse(await api(service, `/v1/responses/${id}?stream=true`));
    const after = await collectSse(await api(service, `/v1/responses/${id}?stream=true&starting_after=3`));
    assert.deepEqual(after.map((frame) => frame.id), all.slice(3).map((frame) => frame.id));
    assert.equal(after[0]!.id, '4');
    assert.equal(JSON.parse(after.at(-1)!.data).type, 'response.incomplete');
  }));

  test('cancel: queued -> 200 cancelled; running -> 202 then cancelled; finished -> 409 task_not_cancellable', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, async (service) => {
      const running = await service.client.createResponse({ model: 'lmsp-tiny', input: 'a', background: true, max_output_tokens: 5000 });
      const queued = await service.client.createResponse({ model: 'lmsp-tiny', input: 'b', background: true, max_output_tokens: 5 });
      await waitFor(async () => (await service.client.getResponse(running.body.id)).output[0]?.content[0]?.text);

      const cancelQueued = await api(service, `/v1/responses/${queued.body.id}/cancel`, { method: 'POST' });
      assert.equal(cancelQueued.status, 200);
      assert.equal((await json<ResponseObject>(cancelQueued)).status, 'cancelled');

      const cancelRunning = await api(service, `/v1/responses/${running.body.id}/cancel`, { method: 'POST' });
      assert.equal(cancelRunning.status, 202);
      const started = Date.now();
      const cancelled = await waitFor(async () => {
        const current = await service.client.getResponse(running.body.id);
        return current.status === 'cancelled' ? current : null;
      });
      assert.ok(Date.now() - started < 1500, 'the worker stops within about a second');
      assert.ok(cancelled.output[0]!.content[0]!.text.length > 0, 'the partial output stays');
      const again = await api(service, `/v1/responses/${running.body.id}/cancel`, { method: 'POST' });
      assert.equal(again.status, 200);
      const events = await service.client.taskEvents(running.body.task.id, 0, 1000);
      assert.equal(events.data.filter((event) => event.type === 'response.cancelled').length, 1, 'no new event for a repeated cancel');
      assert.equal(events.data.at(-1)!.type, 'response.cancelled');

      const done = await service.client.createResponse({ model: 'lmsp-tiny', input: 'c', max_output_tokens: 3 });
      const late = await api(service, `/v1/responses/${done.body.id}/cancel`, { method: 'POST' });
      assert.equal(late.status, 409);
      assert.equal(late.headers.get('x-should-retry'), 'false');
      assert.equal((await json<{ error: { code: string } }>(late)).error.code, 'task_not_cancellable');
    }));

  test('DELETE: 409 response_not_finished while running, then deletes response, task and events', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
      const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'a', background: true, max_output_tokens: 3000 });
      await waitFor(async () => (await service.client.getResponse(created.body.id)).task.status === 'running');
      const early = await api(service, `/v1/responses/${created.body.id}`, { method: 'DELETE' });
      assert.equal(early.status, 409);
      assert.equal((await json<{ error: { code: string } }>(early)).error.code, 'response_not_finished');
      await service.client.cancelResponse(created.body.id);
      await waitFor(async () => (await service.client.getResponse(created.body.id)).status === 'cancelled');
      const deleted = await api(service, `/v1/responses/${created.body.id}`, { method: 'DELETE' });
      assert.equal(deleted.status, 200);
      assert.deepEqual(await deleted.json(), { id: created.body.id, object: 'response', deleted: true });
      assert.equal((await api(service, `/v1/responses/${created.body.id}`)).status, 404);
      assert.equal((await api(service, `/v1/tasks/${created.body.task.id}`)).status, 404);
      assert.equal(countRows(service, 'task_events'), 0);
    }));

  test('input_items returns the input as messages', () => withService({}, async (service) => {
    const created = await service.client.createResponse({
      model: 'lmsp-tiny', max_output_tokens: 2,
      input: [{ role: 'system', content: 'be brief' }, { role: 'user', content: [{ type: 'input_text', text: 'hello' }] }],
    });
    const items = await service.client.inputItems(created.body.id);
    assert.equal(items.object, 'list');
    const messages = (list: InputItemList) => list.data.filter((item): item is InputMessageObject => item.type === 'message');
    assert.deepEqual(messages(items).map((item) => [item.type, item.role, item.content[0]!.text]), [['message', 'system', 'be brief'], ['message', 'user', 'hello']]);
    const plain = await service.client.createResponse({ model: 'lmsp-tiny', input: 'just text', max_output_tokens: 2 });
    const plainItems = await service.client.inputItems(plain.body.id);
    assert.deepEqual(messages(plainItems).map((item) => [item.role, item.content[0]!.type, item.content[0]!.text]), [['user', 'input_text', 'just text']]);
    // Pages follow `after`; a cursor that names no item is 400, never the first page again.
    const first = items.data[0]!.id;
    const page = await json<{ data: Array<{ id: string }> }>(await api(service, `/v1/responses/${created.body.id}/input_items?order=asc&after=${first}`));
    assert.deepEqual(page.data.map((item) => item.id), items.data.slice(1).map((item) => item.id));
    const unknown = await api(service, `/v1/responses/${created.body.id}/input_items?after=msg_nope`);
    assert.equal(unknown.status, 400);
    const error = await json<{ error: { code: string; param: string } }>(unknown);
    assert.deepEqual([error.error.code, error.error.param], ['invalid_request', 'after']);
  }));

  test('input_items: an output message given back keeps its id and status, and its text parts carry annotations as OpenAI\'s do', () => withService({}, async (service) => {
    const first = await service.client.createResponse({ model: 'lmsp-tiny', input: 'one', max_output_tokens: 3, seed: 1 });
    const given = first.body.output[0]!;
    assert.equal(given.status, 'incomplete');
    // The usual pattern of a client that keeps the conversation itself: the output items, as they came, in the next input.
    const second = await service.client.createResponse({
      model: 'lmsp-tiny', max_output_tokens: 2, input: [{ role: 'user', content: 'one' }, given as never, { role: 'assistant', content: 'said' }, { role: 'user', content: 'two' }],
    });
    const items = await service.client.inputItems(second.body.id);
    assert.deepEqual(items.data[1], { id: given.id, type: 'message', role: 'assistant', status: 'incomplete', content: [{ type: 'output_text', text: given.content[0]!.text, annotations: [], logprobs: [] }] });
    assert.deepEqual(items.data[2], { id: items.data[2]!.id, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'said', annotations: [], logprobs: [] }] });
    assert.match(items.data[2]!.id, /^msg_/);
    assert.notEqual(items.data[2]!.id, given.id);
    // Input text parts stay as they are: OpenAI's input_text has no annotations.
    assert.deepEqual(items.data[3], { id: items.data[3]!.id, type: 'message', role: 'user', status: 'completed', content: [{ type: 'input_text', text: 'two' }] });
    // As OpenAI's types: a null id or status is absent (a new id, completed), on every kind of item.
    const nulls = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', max_output_tokens: 2, input: [
      { role: 'user', content: 'x', id: null, status: null },
      { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}', id: null, status: null },
      { type: 'function_call_output', call_id: 'c1', output: 'done', id: null, status: null },
    ] } });
    assert.equal(nulls.status, 200, await nulls.clone().text());
    const nullItems = await service.client.inputItems((await json<{ id: string }>(nulls)).id);
    assert.deepEqual(nullItems.data.map((item) => [item.id.split('_')[0], item.status]), [['msg', 'completed'], ['fc', 'completed'], ['fco', 'completed']]);
    // A status that is none of OpenAI's, an id that is not a string or is empty, and an id given
    // twice (input_items pages by it) are 400s naming the field.
    const refused = async (input: unknown[], param: string) => {
      const answer = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', max_output_tokens: 2, input } });
      assert.equal(answer.status, 400, param);
      const error = (await json<{ error: { code: string; param: string; message: string } }>(answer)).error;
      assert.deepEqual([error.code, error.param], ['invalid_request', param]);
      return error.message;
    };
    await refused([{ role: 'user', content: 'x', status: 'weird' }], 'input[0].status');
    await refused([{ role: 'user', content: 'x', id: 5 }], 'input[0].id');
    await refused([{ role: 'user', content: 'x', id: '' }], 'input[0].id');
    assert.equal(await refused([{ role: 'user', content: 'a', id: 'msg_a' }, { role: 'user', content: 'b', id: 'msg_b' }, { role: 'user', content: 'c', id: 'msg_a' }], 'input[2].id'),
      'Duplicate item found with id msg_a.');
    await refused([{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', id: 'x' }, { type: 'function_call_output', call_id: 'c', output: 'o', id: 'x' }], 'input[1].id');
  }));

  test('previous_response_id continues a conversation; unknown ids are 404', () => withService({}, async (service) => {
    const first = await service.client.createResponse({ model: 'lmsp-tiny', input: 'one', max_output_tokens: 5, seed: 1 });
    const second = await service.client.createResponse({ model: 'lmsp-tiny', input: 'two', max_output_tokens: 5, seed: 1, previous_response_id: first.body.id });
    assert.equal(second.body.previous_response_id, first.body.id);
    assert.ok((second.body.usage?.input_tokens ?? 0) > (first.body.usage?.input_tokens ?? 0), 'the earlier turn is part of the prompt');
    const missing = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', previous_response_id: 'resp_nope' } });
    assert.equal(missing.status, 404);
    const body = await json<{ error: { code: string; param: string } }>(missing);
    assert.equal(body.error.param, 'previous_response_id');
    // An empty id is a mistake to report, as OpenAI does, not a request to start afresh.
    const empty = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', previous_response_id: '' } });
    assert.equal(empty.status, 400);
    const refused = (await json<{ error: { code: string; param: string } }>(empty)).error;
    assert.deepEqual([refused.code, refused.param], ['invalid_request', 'previous_response_id']);
  }));

  test('store: false deletes the response as soon as it finishes; background requires store', () => withService({}, async (service) => {
    const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 3, store: false });
    assert.equal(created.body.status, 'incomplete');
    await waitFor(async () => (await api(service, `/v1/responses/${created.body.id}`)).status === 404);
    assert.equal(countRows(service, 'tasks'), 0);
    const invalid = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', background: true, store: false } });
    assert.equal(invalid.status, 400);
    assert.equal((await json<{ error: { param: string } }>(invalid)).error.param, 'store');
  }));

  test('seed fixes the output; temperature 0 is deterministic', () => withService({}, async (service) => {
    const run = async (body: object) => (await service.client.createResponse({ model: 'lmsp-tiny', input: 'same', max_output_tokens: 40, ...body })).body.output[0]!.content[0]!.text;
    assert.equal(await run({ seed: 7 }), await run({ seed: 7 }));
    assert.notEqual(await run({ seed: 7 }), await run({ seed: 8 }));
    assert.equal(await run({ temperature: 0, seed: 1 }), await run({ temperature: 0, seed: 2 }));
  }));

  test('context: max_output_tokens above the context is 400; input + output beyond it is context_length_exceeded', () => withService({}, async (service) => {
    const tooMany = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', max_output_tokens: 16385 } });
    assert.equal(tooMany.status, 400);
    assert.equal((await json<{ error: { param: string } }>(tooMany)).error.param, 'max_output_tokens');
    const longInput = 'word '.repeat(2000); // 10,000 tokens with the byte-level vocabulary ("▁w", "o", "r", "d")
    const exceeded = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: longInput, max_output_tokens: 10000 } });
    assert.equal(exceeded.status, 400);
    assert.equal((await json<{ error: { code: string } }>(exceeded)).error.code, 'context_length_exceeded');
    assert.equal(countRows(service, 'tasks'), 0, 'nothing was written');
    const fits = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: longInput, max_output_tokens: 100, background: true } });
    assert.equal(fits.status, 202);
  }));

  test('without max_output_tokens the default 1024 must fit beside the input too (LMSP 6)', { timeout: 120_000 }, () => withService({}, async (service) => {
    const { context_length: contextLength } = await json<{ context_length: number }>(await api(service, '/v1/models/lmsp-tiny'));
    // Byte-level vocabulary: about a token a byte, so this input leaves less than the default 1024.
    const input = 'ab '.repeat(Math.floor((contextLength - 900) / 3));
    const asked = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input, max_output_tokens: 1024 } });
    assert.equal(asked.status, 400);
    assert.match((await json<{ error: { code: string; message: string } }>(asked)).error.message, /and max_output_tokens \(1024\) exceed/);
    const byDefault = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input, background: true, seed: 1 } });
    assert.equal(byDefault.status, 400);
    const refused = (await json<{ error: { code: string; param: string; message: string } }>(byDefault)).error;
    assert.deepEqual([refused.code, refused.param], ['context_length_exceeded', 'input']);
    const room = Number(/at most (\d+)\.$/.exec(refused.message)?.[1]);
    assert.match(refused.message, /^The input \(\d+ tokens\) and the default max_output_tokens \(1024\) exceed the context length of 'lmsp-tiny' \(\d+ tokens\)\. Send a max_output_tokens of at most \d+\.$/);
    assert.equal(countRows(service, 'tasks'), 0, 'nothing was written');
    // The room the message names is exactly what fits.
    const fits = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input, background: true, max_output_tokens: room } });
    assert.equal(fits.status, 202);
    const over = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input, background: true, max_output_tokens: room + 1 } });
    assert.equal(over.status, 400);
    const tooLong = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'ab '.repeat(Math.ceil(contextLength / 3)) } });
    assert.equal(tooLong.status, 400);
    assert.equal((await json<{ error: { code: string } }>(tooLong)).error.code, 'context_length_exceeded');
  }));

  test('context: a function call\'s arguments and the tools\' definitions count against it too', () => withService({}, async (service) => {
    const long = 'a'.repeat(100_000);
    const viaCall = await api(service, '/v1/responses', {
      method: 'POST',
      json: {
        model: 'lmsp-tiny', max_output_tokens: 4, tools: [{ type: 'function', name: 'f' }],
        input: [{ role: 'user', content: 'call' }, { type: 'function_call', call_id: 'c1', name: 'f', arguments: long }, { type: 'function_call_output', call_id: 'c1', output: 'ok' }],
      },
    });
    assert.equal(viaCall.status, 400);
    assert.equal((await json<{ error: { code: string } }>(viaCall)).error.code, 'context_length_exceeded');
    const viaTools = await api(service, '/v1/responses', {
      method: 'POST', json: { model: 'lmsp-tiny', max_output_tokens: 4, input: 'x', tools: [{ type: 'function', name: 'f', description: long }] },
    });
    assert.equal(viaTools.status, 400);
    assert.equal((await json<{ error: { code: string } }>(viaTools)).error.code, 'context_length_exceeded');
    assert.equal(countRows(service, 'tasks'), 0, 'nothing was written');
  }));

  test('unknown model is 404 model_not_found naming the field', () => withService({}, async (service) => {
    const response = await api(service, '/v1/responses', { method: 'POST', json: { model: 'nope', input: 'x' } });
    assert.equal(response.status, 404);
    const body = await json<{ error: { code: string; param: string; type: string } }>(response);
    assert.deepEqual([body.error.code, body.error.param], ['model_not_found', 'model']);
  }));
});
