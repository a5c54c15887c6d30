/**
 * Chat Completions over raw HTTP (LMSP 13): the answer and its header, the stream's frames, the
 * task's event log, validation with `param`, cancel and disconnect, idempotency, stored
 * completions and isolation, each against the real service.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ChatCompletionChunk, ChatCompletionObject } from '../../src/api/chat-completions.js';
import type { TaskEvent, TaskObject } from '../../src/api/types.js';
import { SYNTHETIC_SPACE_TOKEN_ID, syntheticByteTokenId } from '../../src/engine/synthetic-model.js';
import { api, pairClient, waitFor, withService, type TestService } from '../helpers/service.js';
import { collectSse, readSse } from '../helpers/sse.js';

const MESSAGES = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }];

async function json<T>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

function chat(service: Pick<TestService, 'url' | 'token'>, body: object, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'lmsp-tiny', messages: MESSAGES, ...body }, headers, ...(signal ? { signal } : {}) });
}

/** The `data:` payloads of a streamed completion, until the server closes the stream. */
/** A chunk that would tell a client nothing: an empty text and no role, call or finish reason. */
function isEmptyDelta(chunk: ChatCompletionChunk): boolean {
  const choice = chunk.choices[0];
  return choice !== undefined && choice.finish_reason === null && JSON.stringify(choice.delta) === '{"content":""}';
}

/** OpenAI's stream sends no empty deltas: text only in the role chunk may be empty. */
function assertNoEmptyDelta(chunks: ChatCompletionChunk[]): void {
  const empty = chunks.filter(isEmptyDelta);
  assert.deepEqual(empty, [], 'no chunk with an empty delta is streamed');
}

async function chunksOf(response: Response): Promise<{ chunks: ChatCompletionChunk[]; done: boolean; raw: string[] }> {
  const frames = await collectSse(response);
  const raw = frames.map((frame) => frame.data);
  const done = raw.at(-1) === '[DONE]';
  return { chunks: raw.filter((data) => data !== '[DONE]').map((data) => JSON.parse(data) as ChatCompletionChunk), done, raw };
}

function contentOf(chunks: ChatCompletionChunk[]): string {
  return chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
}

async function allEvents(service: Pick<TestService, 'url' | 'token'>, taskId: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  let after = 0;
  for (;;) {
    const page = await json<{ data: TaskEvent[]; has_more: boolean }>(await api(service, `/v1/tasks/${taskId}/events?starting_after=${after}&limit=1000`));
    events.push(...page.data);
    if (!page.has_more) return events;
    after = page.data.at(-1)!.sequence_number;
  }
}

async function expectError(response: Response, status: number, code: string, param: string | null): Promise<void> {
  const body = await json<{ error: { code: string; param: string | null; type: string; message: string } }>(response);
  assert.equal(response.status, status, JSON.stringify(body));
  assert.equal(body.error.code, code, body.error.message);
  assert.equal(body.error.param, param, body.error.message);
}

/** LMSP 7.4: `cancelling`, then only chunks the worker was finishing, then `cancelled`. */
function assertEndsCancelled(types: string[]): void {
  const cancelling = types.indexOf('chat.completion.cancelling');
  assert.ok(cancelling > 0, types.join(', '));
  assert.equal(types.at(-1), 'chat.completion.cancelled');
  assert.ok(types.slice(cancelling + 1, -1).every((type) => type === 'chat.completion.chunk'), types.slice(cancelling).join(', '));
}

describe('Chat Completions (LMSP 13)', () => {
  test('a plain create answers 200 with the chat.completion and LMSP-Task-Id; store defaults to false', { timeout: 60_000 }, () => withService({}, async (service) => {
    const response = await chat(service, { max_completion_tokens: 12, seed: 1 });
    assert.equal(response.status, 200);
    const taskId = response.headers.get('lmsp-task-id');
    assert.match(taskId ?? '', /^task_/);
    const body = await json<ChatCompletionObject>(response);
    assert.match(body.id, /^chatcmpl-[0-9A-Za-z]{32}$/);
    assert.equal(body.object, 'chat.completion');
    assert.equal(body.model, 'lmsp-tiny');
    assert.equal(typeof body.created, 'number');
    assert.match(body.system_fingerprint, /^fp_[0-9a-f]{10}$/);
    assert.equal(body.choices.length, 1);
    const [choice] = body.choices;
    assert.equal(choice!.index, 0);
    assert.equal(choice!.message.role, 'assistant');
    assert.equal(choice!.message.refusal, null);
    assert.equal(choice!.message.tool_calls, undefined);
    assert.ok((choice!.message.content ?? '').length > 0);
    assert.equal(choice!.finish_reason, 'length', 'lmsp-tiny never stops by itself');
    assert.equal(choice!.logprobs, null);
    assert.equal(body.usage.completion_tokens, 12);
    assert.ok(body.usage.prompt_tokens > 0);
    assert.equal(body.usage.total_tokens, body.usage.prompt_tokens + 12);
    // OpenAI's breakdowns, which typed clients read without checking for them: all 0 here.
    assert.deepEqual(body.usage.prompt_tokens_details, { cached_tokens: 0, audio_tokens: 0 });
    assert.deepEqual(body.usage.completion_tokens_details, { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
    // store: false (the default): the completion and its task are gone once it has finished.
    await waitFor(async () => (await api(service, `/v1/tasks/${taskId}`)).status === 404, { what: 'the ephemeral task to be deleted' });
    assert.equal((await api(service, `/v1/chat/completions/${body.id}`)).status, 404);
  }));

  test('max_tokens is the older name of max_completion_tokens; a seed makes the answer repeatable', { timeout: 60_000 }, () => withService({}, async (service) => {
    const first = await json<ChatCompletionObject>(await chat(service, { max_tokens: 20, seed: 5, temperature: 0.9, top_p: 0.8 }));
    const second = await json<ChatCompletionObject>(await chat(service, { max_completion_tokens: 20, seed: 5, temperature: 0.9, top_p: 0.8 }));
    assert.equal(first.usage.completion_tokens, 20);
    assert.equal(first.choices[0]!.message.content, second.choices[0]!.message.content);
  }));

  test('frequency_penalty and presence_penalty change the sampling as OpenAI defines them, repeatably', { timeout: 60_000 }, () => withService({}, async (service) => {
    const text = async (extra: object) =>
      (await json<ChatCompletionObject>(await chat(service, { max_completion_tokens: 60, temperature: 0, ...extra }))).choices[0]!.message.content!;
    const distinct = (value: string) => new Set(value).size;
    // Greedy lmsp-tiny falls into a loop; a frequency penalty pushes it out, a negative one keeps it there.
    const greedy = await text({});
    const penalized = await text({ frequency_penalty: 2 });
    assert.notEqual(penalized, greedy);
    assert.ok(distinct(penalized) > distinct(greedy), `more distinct characters with the penalty: ${JSON.stringify(penalized)} against ${JSON.stringify(greedy)}`);
    assert.equal(await text({ frequency_penalty: 2 }), penalized, 'the same request, the same text');
    const presence = await text({ presence_penalty: 2 });
    assert.notEqual(presence, greedy);
    assert.ok(distinct(await text({ frequency_penalty: -2 })) <= distinct(greedy), 'a negative penalty favours what was said');
    assert.equal(await text({ frequency_penalty: 0, presence_penalty: 0 }), greedy, '0 is no penalty');
  }));

  test('logit_bias: +100 makes a token the only choice, -100 bans it, ids past the vocabulary change nothing; repeatable', { timeout: 60_000 }, () => withService({}, async (service) => {
    const text = async (extra: object) =>
      (await json<ChatCompletionObject>(await chat(service, { max_completion_tokens: 40, seed: 11, temperature: 1, ...extra }))).choices[0]!.message.content!;
    const free = await text({});
    const only = await text({ logit_bias: { [syntheticByteTokenId(0x51)]: 100 } });
    assert.equal(only, 'Q'.repeat(40), 'a bias of 100 on Q: nothing but Q');
    // Every token the free text used, banned: none of its characters comes back.
    const used = [...new Set(free)];
    // A space is the byte token or the model's word-boundary token: both go.
    const tokensOf = (character: string) => (character === ' ' ? [syntheticByteTokenId(0x20), SYNTHETIC_SPACE_TOKEN_ID] : [syntheticByteTokenId(character.charCodeAt(0))]);
    const ban = Object.fromEntries(used.flatMap(tokensOf).map((token) => [token, -100]));
    const banned = await text({ logit_bias: ban });
    assert.equal(banned.length > 0, true);
    assert.deepEqual([...banned].filter((character) => used.includes(character)), [], `${JSON.stringify(banned)} uses none of ${JSON.stringify(used.join(''))}`);
    assert.equal(await text({ logit_bias: ban }), banned, 'the same request, the same text');
    // A bias is added to the logit: a middling one makes Q common without taking over; a bias of 0
    // and ids past the vocabulary change nothing.
    const mild = await text({ logit_bias: { [syntheticByteTokenId(0x51)]: 8 } });
    assert.ok([...mild].filter((character) => character === 'Q').length > [...free].filter((character) => character === 'Q').length, `more Q with a bias of 8: ${JSON.stringify(mild)}`);
    assert.ok(mild !== 'Q'.repeat(40));
    assert.equal(await text({ logit_bias: { [syntheticByteTokenId(0x51)]: 0, 999999: 100 } }), free);
  }));

  test('stop: the content ends before the earliest stop sequence, which is not sent; finish_reason stop', { timeout: 60_000 }, () => withService({}, async (service) => {
    const free = (await json<ChatCompletionObject>(await chat(service, { max_completion_tokens: 40, seed: 9, temperature: 0 }))).choices[0]!.message.content!;
    const stop = free.slice(10, 13);
    const expected = free.slice(0, free.indexOf(stop));
    for (const value of [stop, ['zzzzzz', stop]]) {
      const response = await chat(service, { max_completion_tokens: 40, seed: 9, temperature: 0, stop: value, stream: true });
      const { chunks, done } = await chunksOf(response);
      assert.ok(done);
      assert.equal(contentOf(chunks), expected, 'no part of the stop sequence is streamed');
      assert.equal(chunks.at(-1)!.choices[0]!.finish_reason, 'stop');
      assertNoEmptyDelta(chunks);
    }
  }));

  test('every field is validated, with param', { timeout: 60_000 }, () => withService({}, async (service) => {
    const cases: Array<[object, number, string, string | null]> = [
      [{ n: 2 }, 400, 'invalid_request', 'n'],
      [{ n: 0 }, 400, 'invalid_request', 'n'],
      [{ stop: ['a', 'b', 'c', 'd', 'e'] }, 400, 'invalid_request', 'stop'],
      [{ stop: [''] }, 400, 'invalid_request', 'stop[0]'],
      [{ stop: 5 }, 400, 'invalid_request', 'stop'],
      [{ temperature: 2.5 }, 400, 'invalid_request', 'temperature'],
      [{ top_p: -0.1 }, 400, 'invalid_request', 'top_p'],
      [{ frequency_penalty: 2.5 }, 400, 'invalid_request', 'frequency_penalty'],
      [{ frequency_penalty: 'high' }, 400, 'invalid_request', 'frequency_penalty'],
      [{ presence_penalty: -2.1 }, 400, 'invalid_request', 'presence_penalty'],
      [{ seed: 'x' }, 400, 'invalid_request', 'seed'],
      [{ max_completion_tokens: 0 }, 400, 'invalid_request', 'max_completion_tokens'],
      [{ max_tokens: 1.5 }, 400, 'invalid_request', 'max_tokens'],
      [{ max_completion_tokens: 100_000 }, 400, 'invalid_request', 'max_completion_tokens'],
      [{ store: 'yes' }, 400, 'invalid_request', 'store'],
      [{ stream: 1 }, 400, 'invalid_request', 'stream'],
      [{ on_restart: 'later' }, 400, 'invalid_request', 'on_restart'],
      [{ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 400, 'invalid_request', 'metadata'],
      [{ metadata: { k: 1 } }, 400, 'invalid_request', 'metadata.k'],
      [{ logit_bias: { 12: 101 } }, 400, 'invalid_request', 'logit_bias'],
      [{ logit_bias: { 12: -100.5 } }, 400, 'invalid_request', 'logit_bias'],
      [{ logit_bias: { abc: 1 } }, 400, 'invalid_request', 'logit_bias'],
      [{ logit_bias: { '-1': 1 } }, 400, 'invalid_request', 'logit_bias'],
      [{ logit_bias: { '01': 1 } }, 400, 'invalid_request', 'logit_bias'],
      [{ logit_bias: { 12: 'up' } }, 400, 'invalid_request', 'logit_bias[12]'],
      [{ logit_bias: [1, 2] }, 400, 'invalid_request', 'logit_bias'],
      [{ logit_bias: Object.fromEntries(Array.from({ length: 1025 }, (_, i) => [String(i), 1])) }, 400, 'invalid_request', 'logit_bias'],
      [{ logprobs: true }, 400, 'invalid_request', 'logprobs'],
      [{ top_logprobs: 2 }, 400, 'invalid_request', 'top_logprobs'],
      [{ logprobs: false, top_logprobs: 0 }, 400, 'invalid_request', 'top_logprobs'],
      [{ top_logprobs: 21 }, 400, 'invalid_request', 'top_logprobs'],
      [{ messages: [] }, 400, 'invalid_request', 'messages'],
      [{ messages: [{ role: 'function', content: 'x', name: 'f' }] }, 400, 'invalid_request', 'messages[0].role'],
      [{ messages: [{ role: 'user' }] }, 400, 'invalid_request', 'messages[0].content'],
      [{ messages: [{ role: 'assistant', content: null }] }, 400, 'invalid_request', 'messages[0].content'],
      [{ messages: [{ role: 'user', content: [] }] }, 400, 'invalid_request', 'messages[0].content'],
      [{ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'y', tool_calls: [] }] }, 400, 'invalid_request', 'messages[1].tool_calls'],
      [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 400, 'invalid_request', 'messages[0].content[0].type'],
      [{ messages: [{ role: 'user', content: 'x' }, { role: 'tool', content: 'r' }] }, 400, 'invalid_request', 'messages[1].tool_call_id'],
      [{ messages: [{ role: 'user', content: 'x' }, { role: 'tool', content: 'r', tool_call_id: 'call_nope' }] }, 400, 'invalid_request', 'messages[1].tool_call_id'],
      [{ messages: [{ role: 'assistant', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f' } }] }] }, 400, 'invalid_request', 'messages[0].tool_calls[0].function.arguments'],
      [{ messages: [{ role: 'assistant', tool_calls: [{ id: 'c1', type: 'custom', custom: { name: 'f', input: 'x' } }] }] }, 400, 'invalid_request', 'messages[0].tool_calls[0].type'],
      [{ response_format: { type: 'xml' } }, 400, 'invalid_request', 'response_format.type'],
      [{ response_format: { type: 'json_schema' } }, 400, 'invalid_request', 'response_format.json_schema'],
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '(a)\\1' } } } }, 400, 'unsupported_schema', 'response_format.json_schema.schema'],
      [{ tools: [{ type: 'function', function: { name: 'bad name' } }] }, 400, 'invalid_request', 'tools[0].function.name'],
      [{ tools: [{ type: 'custom', custom: { name: 'f' } }] }, 400, 'invalid_request', 'tools[0].type'],
      [{ tools: [{ type: 'function' }] }, 400, 'invalid_request', 'tools[0].function'],
      [{ tools: Array.from({ length: 129 }, (_, i) => ({ type: 'function', function: { name: `f${i}` } })) }, 400, 'invalid_request', 'tools'],
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { e: { type: 'string', format: 'ipv6' } } } } }] }, 400, 'unsupported_schema', 'tools[0].function.parameters'],
      [{ tool_choice: 'required' }, 400, 'invalid_request', 'tool_choice'],
      [{ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } }, 400, 'invalid_request', 'tool_choice.function.name'],
      [{ tool_choice: 'sometimes' }, 400, 'invalid_request', 'tool_choice'],
      [{ parallel_tool_calls: 'yes' }, 400, 'invalid_request', 'parallel_tool_calls'],
      [{ model: 'nope' }, 404, 'model_not_found', 'model'],
      [{ messages: [{ role: 'user', content: 'a'.repeat(20_000) }], max_completion_tokens: 1000 }, 400, 'context_length_exceeded', 'messages'],
    ];
    for (const [body, status, code, param] of cases) {
      await expectError(await chat(service, body), status, code, param).catch((error: Error) => {
        throw new Error(`${JSON.stringify(body).slice(0, 200)}: ${error.message}`);
      });
    }
    const { data } = await json<{ data: TaskObject[] }>(await api(service, '/v1/tasks'));
    assert.deepEqual(data, [], 'a refused request leaves no task');
  }));

  test('an empty tools array is 400 naming tools, as OpenAI answers Chat Completions; the Responses API accepts it, as OpenAI does', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      await expectError(await chat(service, { tools: [] }), 400, 'invalid_request', 'tools');
      const answered = await chat(service, { tools: null, max_completion_tokens: 2 });
      assert.equal(answered.status, 200, await answered.text());
      const responses = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'Hello', tools: [], max_output_tokens: 2 } });
      assert.equal(responses.status, 200, await responses.text());
    }));

  test('tool_choice and parallel_tool_calls without tools are 400 naming them, as OpenAI answers Chat Completions; the Responses API accepts auto and none', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      for (const tool_choice of ['auto', 'none', 'required', { type: 'function', function: { name: 'f' } }]) {
        await expectError(await chat(service, { tool_choice }), 400, 'invalid_request', 'tool_choice');
      }
      await expectError(await chat(service, { parallel_tool_calls: false }), 400, 'invalid_request', 'parallel_tool_calls');
      const unset = await chat(service, { tool_choice: null, parallel_tool_calls: null, max_completion_tokens: 2 });
      assert.equal(unset.status, 200, await unset.text());
      const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }];
      const withTools = await chat(service, { tools, tool_choice: 'none', parallel_tool_calls: false, max_completion_tokens: 2 });
      assert.equal(withTools.status, 200, await withTools.text());
      for (const tool_choice of ['auto', 'none']) {
        const responses = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'Hello', tool_choice, max_output_tokens: 2 } });
        assert.equal(responses.status, 200, await responses.text());
      }
    }));

  test('stream: a role chunk, content chunks, the finish_reason chunk, the usage chunk, then [DONE]; the log holds the same chunks', { timeout: 60_000 }, () => withService({}, async (service) => {
    const response = await chat(service, { max_completion_tokens: 15, seed: 2, stream: true, stream_options: { include_usage: true }, store: true, metadata: { run: 'a' } });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const taskId = response.headers.get('lmsp-task-id')!;
    const { chunks, done, raw } = await chunksOf(response);
    assert.ok(done, 'the stream ends with data: [DONE]');
    const id = chunks[0]!.id;
    for (const chunk of chunks) {
      assert.equal(chunk.id, id);
      assert.equal(chunk.object, 'chat.completion.chunk');
      assert.equal(chunk.model, 'lmsp-tiny');
    }
    assert.deepEqual(chunks[0]!.choices[0]!.delta, { role: 'assistant', content: '', refusal: null });
    const usage = chunks.at(-1)!;
    assert.deepEqual(usage.choices, []);
    assert.equal(usage.usage?.completion_tokens, 15);
    const last = chunks.at(-2)!;
    assert.equal(last.choices[0]!.finish_reason, 'length');
    assert.deepEqual(last.choices[0]!.delta, {});
    for (const chunk of chunks.slice(0, -1)) assert.equal(chunk.usage, null, 'with include_usage every other chunk has usage: null');

    const stored = await json<ChatCompletionObject>(await api(service, `/v1/chat/completions/${id}`));
    assert.equal(stored.choices[0]!.message.content, contentOf(chunks));
    assert.equal(stored.choices[0]!.finish_reason, 'length');
    assert.deepEqual(stored.metadata, { run: 'a' });

    const events = await allEvents(service, taskId);
    events.forEach((event, index) => assert.equal(event.sequence_number, index + 1, 'gapless from 1'));
    const types = events.map((event) => event.type).filter((type) => type !== 'chat.completion.loading');
    assert.deepEqual(types.slice(0, 2), ['chat.completion.created', 'chat.completion.in_progress']);
    assert.equal(types.at(-1), 'chat.completion.completed');
    assert.deepEqual(new Set(types.slice(2, -1)), new Set(['chat.completion.chunk']));
    assertNoEmptyDelta(chunks);
    // Chunks with an empty delta stay in the log for the resume snapshot they carry, unsent.
    const sendable = events.filter((event) => event.type === 'chat.completion.chunk' && !isEmptyDelta(event.chunk as ChatCompletionChunk));
    assert.deepEqual(sendable.map((event) => JSON.stringify(event.chunk)), raw.slice(0, -1),
      'each chunk streamed is a chunk event, exactly as logged');
    assert.deepEqual((events.at(-1)!.completion as ChatCompletionObject).choices[0]!.message.content, stored.choices[0]!.message.content);
    const task = await json<TaskObject>(await api(service, `/v1/tasks/${taskId}`));
    assert.equal(task.kind, 'chat_completion');
    assert.equal(task.completion_id, id);
    assert.equal(task.response_id, null);

    // The task's log as server-sent events, as for every kind (LMSP 7.3).
    const sse = await collectSse(await api(service, `/v1/tasks/${taskId}/events?stream=true`));
    assert.deepEqual(sse.map((frame) => frame.event), events.map((event) => event.type));
  }));

  test('POST /v1/tasks/{id}/cancel stops a plain create, which answers 409 task_cancelled', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, async (service) => {
      const pending = chat(service, { max_completion_tokens: 2000, store: true });
      const task = await waitFor(async () => (await json<{ data: TaskObject[] }>(await api(service, '/v1/tasks?status=running'))).data[0]);
      const cancel = await api(service, `/v1/tasks/${task.id}/cancel`, { method: 'POST' });
      assert.equal(cancel.status, 202);
      const response = await pending;
      assert.equal(response.headers.get('lmsp-task-id'), task.id);
      assert.equal(response.headers.get('x-should-retry'), 'false');
      await expectError(response, 409, 'task_cancelled', null);
      assertEndsCancelled((await allEvents(service, task.id)).map((event) => event.type));
      const stored = await json<ChatCompletionObject>(await api(service, `/v1/chat/completions/${task.completion_id}`));
      assert.equal(stored.choices[0]!.finish_reason, null, 'a cancelled completion has no finish reason');
      assert.ok(stored.usage.completion_tokens < 2000);
    }));

  test('a client that leaves a plain create cancels its task', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, async (service) => {
      const controller = new AbortController();
      const pending = chat(service, { max_completion_tokens: 2000, store: true }, {}, controller.signal).catch((error: Error) => error);
      const task = await waitFor(async () => (await json<{ data: TaskObject[] }>(await api(service, '/v1/tasks?status=running'))).data[0]);
      controller.abort();
      assert.ok((await pending) instanceof Error);
      await waitFor(async () => (await json<TaskObject>(await api(service, `/v1/tasks/${task.id}`))).status === 'cancelled', { what: 'the task to be cancelled' });
      assertEndsCancelled((await allEvents(service, task.id)).map((event) => event.type));
    }));

  test('a client that leaves a stream cancels its task; a stream cancelled by the task API ends with an error frame', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, async (service) => {
      const controller = new AbortController();
      const response = await chat(service, { max_completion_tokens: 2000, stream: true, store: true }, {}, controller.signal);
      const taskId = response.headers.get('lmsp-task-id')!;
      for await (const frame of readSse(response)) {
        if ((JSON.parse(frame.data) as ChatCompletionChunk).choices[0]?.delta.content) break;
      }
      controller.abort();
      const left = await waitFor(async () => {
        const task = await json<TaskObject>(await api(service, `/v1/tasks/${taskId}`));
        return task.status === 'cancelled' ? task : null;
      }, { what: 'the task to be cancelled' });
      assert.equal(left.kind, 'chat_completion');

      const second = await chat(service, { max_completion_tokens: 2000, stream: true });
      const secondTask = second.headers.get('lmsp-task-id')!;
      const reading = chunksOf(second);
      await waitFor(async () => (await json<TaskObject>(await api(service, `/v1/tasks/${secondTask}`))).status === 'running');
      assert.equal((await api(service, `/v1/tasks/${secondTask}/cancel`, { method: 'POST' })).status, 202);
      const { raw, done } = await reading;
      assert.equal(done, false);
      assert.equal((JSON.parse(raw.at(-1)!) as { error: { code: string } }).error.code, 'task_cancelled');
    }));

  test('Idempotency-Key: a plain create is answered again, a streamed one replays its chunks', { timeout: 60_000 }, () => withService({}, async (service) => {
    const body = { max_completion_tokens: 10, seed: 4, store: true };
    const first = await chat(service, body, { 'idempotency-key': 'plain-1' });
    const firstBody = await first.text();
    const again = await chat(service, body, { 'idempotency-key': 'plain-1' });
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.headers.get('lmsp-task-id'), first.headers.get('lmsp-task-id'));
    assert.equal(await again.text(), firstBody);
    await expectError(await chat(service, { ...body, seed: 5 }, { 'idempotency-key': 'plain-1' }), 422, 'idempotency_key_reused', null);

    const streamed = await chunksOf(await chat(service, { ...body, stream: true }, { 'idempotency-key': 'stream-1' }));
    const replay = await chat(service, { ...body, stream: true }, { 'idempotency-key': 'stream-1' });
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual((await chunksOf(replay)).raw, streamed.raw);
    const { data } = await json<{ data: TaskObject[] }>(await api(service, '/v1/tasks'));
    assert.equal(data.length, 2, 'no new task for a replay');

    // store: false (the default): the task is gone once answered, yet the replay sends the same chunks.
    const ephemeral = { max_completion_tokens: 10, seed: 4, stream: true };
    const sent = await chunksOf(await chat(service, ephemeral, { 'idempotency-key': 'stream-2' }));
    assert.ok(sent.done);
    const replayed = await chat(service, ephemeral, { 'idempotency-key': 'stream-2' });
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true');
    assert.match(replayed.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.deepEqual((await chunksOf(replayed)).raw, sent.raw);
  }));

  test('stored completions: list with filters and cursors, get, messages, update, delete', { timeout: 60_000 }, () => withService({}, async (service) => {
    const ids: string[] = [];
    for (const [index, tag] of ['a', 'b', 'a'].entries()) {
      const body = await json<ChatCompletionObject>(await chat(service, {
        max_completion_tokens: 4, store: true, metadata: { tag, n: String(index) },
        messages: [{ role: 'developer', content: 'D' }, { role: 'user', content: [{ type: 'text', text: 'Hi ' }, { type: 'text', text: 'there' }] }],
      }));
      ids.push(body.id);
    }
    await chat(service, { max_completion_tokens: 4 }); // store: false, never listed
    type Page = { object: string; data: ChatCompletionObject[]; has_more: boolean; first_id: string | null; last_id: string | null };
    const list = async (query: string) => json<Page>(await api(service, `/v1/chat/completions${query}`));
    const all = await list('');
    assert.equal(all.object, 'list');
    assert.deepEqual(all.data.map((item) => item.id), ids, 'oldest first by default, as OpenAI');
    assert.deepEqual((await list('?order=desc')).data.map((item) => item.id), [...ids].reverse());
    const page = await list('?limit=2');
    assert.equal(page.has_more, true);
    assert.equal(page.last_id, ids[1]);
    assert.deepEqual((await list(`?limit=2&after=${ids[1]}`)).data.map((item) => item.id), [ids[2]]);
    assert.deepEqual((await list('?metadata[tag]=a')).data.map((item) => item.id), [ids[0], ids[2]]);
    assert.deepEqual((await list('?metadata[tag]=a&metadata[n]=2')).data.map((item) => item.id), [ids[2]]);
    assert.deepEqual((await list('?model=other')).data, []);

    const messages = await json<{ data: Array<{ id: string; role: string; content: string; content_parts: unknown }>; has_more: boolean }>(
      await api(service, `/v1/chat/completions/${ids[0]}/messages`));
    // As OpenAI: `content_parts` holds the parts a content was sent as, and is null for a string.
    assert.deepEqual(messages.data.map(({ role, content, content_parts }) => ({ role, content, content_parts })), [
      { role: 'developer', content: 'D', content_parts: null },
      { role: 'user', content: 'Hi there', content_parts: [{ type: 'text', text: 'Hi ' }, { type: 'text', text: 'there' }] },
    ]);
    assert.equal(messages.data[0]!.id, `${ids[0]}-0`);

    const updated = await api(service, `/v1/chat/completions/${ids[0]}`, { method: 'POST', json: { metadata: { tag: 'c' } } });
    assert.equal(updated.status, 200);
    assert.deepEqual((await json<ChatCompletionObject>(updated)).metadata, { tag: 'c' });
    assert.deepEqual((await list('?metadata[tag]=c')).data.map((item) => item.id), [ids[0]]);
    await expectError(await api(service, `/v1/chat/completions/${ids[0]}`, { method: 'POST', json: { metadata: { k: 5 } } }), 400, 'invalid_request', 'metadata.k');

    const deleted = await api(service, `/v1/chat/completions/${ids[1]}`, { method: 'DELETE' });
    assert.deepEqual(await json(deleted), { id: ids[1], object: 'chat.completion.deleted', deleted: true });
    assert.equal((await api(service, `/v1/chat/completions/${ids[1]}`)).status, 404);
    assert.deepEqual((await list('')).data.map((item) => item.id), [ids[0], ids[2]]);
  }));

  test('response_format and tool_choice: json_object, a named function, parallel calls, none', { timeout: 90_000 }, () => withService({}, async (service) => {
    const object = await json<ChatCompletionObject>(await chat(service, { response_format: { type: 'json_object' }, seed: 3, max_completion_tokens: 400 }));
    assert.equal(object.choices[0]!.finish_reason, 'stop');
    const parsed = JSON.parse(object.choices[0]!.message.content!) as unknown;
    assert.ok(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed));
    const text = await json<ChatCompletionObject>(await chat(service, { response_format: { type: 'text' }, seed: 3, max_completion_tokens: 5 }));
    assert.equal(text.choices[0]!.finish_reason, 'length');

    const tools = [
      { type: 'function', function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['a'], additionalProperties: false } } },
      { type: 'function', function: { name: 'ping', description: 'No arguments' } },
    ];
    const named = await json<ChatCompletionObject>(await chat(service, { tools, tool_choice: { type: 'function', function: { name: 'add' } }, parallel_tool_calls: false, seed: 1, max_completion_tokens: 200 }));
    assert.equal(named.choices[0]!.finish_reason, 'tool_calls');
    assert.equal(named.choices[0]!.message.content, null);
    const calls = named.choices[0]!.message.tool_calls!;
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.function.name, 'add');
    assert.deepEqual(Object.keys(JSON.parse(calls[0]!.function.arguments) as object), ['a']);

    let parallel = 0;
    for (let seed = 1; seed <= 8 && parallel === 0; seed++) {
      const required = await json<ChatCompletionObject>(await chat(service, { tools, tool_choice: 'required', seed, temperature: 2, max_completion_tokens: 300 }));
      if (required.choices[0]!.finish_reason !== 'tool_calls') continue;
      const made = required.choices[0]!.message.tool_calls!;
      assert.deepEqual(new Set(made.map((call) => call.id)).size, made.length, 'each call its own id');
      for (const call of made) assert.ok(['add', 'ping'].includes(call.function.name));
      if (made.length > 1) parallel += 1;
    }
    assert.ok(parallel > 0, 'parallel_tool_calls (default true) lets one turn hold several calls');

    // Streamed, a forced call is the role chunk, the call's deltas and the finish chunk: the
    // tokens of the call's syntax around them send nothing.
    const streamed = await chunksOf(await chat(service, { tools, tool_choice: 'required', parallel_tool_calls: false, seed: 1, max_completion_tokens: 200, stream: true }));
    assert.ok(streamed.done);
    assertNoEmptyDelta(streamed.chunks);
    assert.equal(streamed.chunks.at(-1)!.choices[0]!.finish_reason, 'tool_calls');
    assert.ok(streamed.chunks.slice(1, -1).every((chunk) => chunk.choices[0]!.delta.tool_calls !== undefined), 'between the first and last chunk, only calls');

    const none = await json<ChatCompletionObject>(await chat(service, { tools, tool_choice: 'none', seed: 1, max_completion_tokens: 60 }));
    assert.equal(none.choices[0]!.finish_reason, 'length');
    assert.equal(none.choices[0]!.message.tool_calls, undefined);
    assert.ok(!none.choices[0]!.message.content!.includes('<tool_call>'));
  }));

  test('an output cut by its token limit ends at a whole character, plain, streamed, stored and as tool arguments; the cut bytes still count', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      // lmsp-tiny's tokens are bytes: every limit below the whole text's length cuts it after another byte.
      const schema = { type: 'object', properties: { a: { type: 'string', enum: ['é😀漢字ü'] } }, required: ['a'], additionalProperties: false };
      const format = { response_format: { type: 'json_schema', json_schema: { name: 's', schema, strict: true } }, seed: 7 };
      const tools = { tools: [{ type: 'function', function: { name: 'f', parameters: schema } }], tool_choice: 'required', parallel_tool_calls: false, seed: 7 };
      const argumentsOf = (completion: ChatCompletionObject) => completion.choices[0]!.message.tool_calls?.[0]?.function.arguments ?? '';
      const whole = (await json<ChatCompletionObject>(await chat(service, { ...format, max_tokens: 60 }))).choices[0]!.message.content!;
      assert.deepEqual(JSON.parse(whole), { a: 'é😀漢字ü' });
      const wholeArguments = argumentsOf(await json<ChatCompletionObject>(await chat(service, { ...tools, max_tokens: 100 })));
      assert.deepEqual(JSON.parse(wholeArguments), { a: 'é😀漢字ü' });
      for (let limit = whole.indexOf('é') + 1; limit < Buffer.byteLength(whole); limit++) {
        const plain = await json<ChatCompletionObject>(await chat(service, { ...format, max_tokens: limit, store: true }));
        const content = plain.choices[0]!.message.content!;
        assert.ok(!content.includes('\uFFFD'), `limit ${limit}: ${JSON.stringify(content)} holds no replacement character`);
        assert.ok(whole.startsWith(content), `limit ${limit}: ${JSON.stringify(content)} is a prefix of the whole text`);
        assert.ok(Buffer.byteLength(content) > limit - 4, `limit ${limit}: only the unfinished character is left out`);
        assert.equal(plain.usage.completion_tokens, limit, `limit ${limit}: every generated token counted`);
        assert.equal(plain.choices[0]!.finish_reason, 'length');
        const stored = await json<ChatCompletionObject>(await api(service, `/v1/chat/completions/${plain.id}`));
        assert.equal(stored.choices[0]!.message.content, content, `limit ${limit}: stored as answered`);
        const { chunks } = await chunksOf(await chat(service, { ...format, max_tokens: limit, stream: true }));
        assert.equal(contentOf(chunks), content, `limit ${limit}: streamed as answered`);
        assertNoEmptyDelta(chunks);
        const args = argumentsOf(await json<ChatCompletionObject>(await chat(service, { ...tools, max_tokens: limit + wholeArguments.length - whole.length })));
        assert.ok(!args.includes('\uFFFD') && wholeArguments.startsWith(args), `limit ${limit}: arguments ${JSON.stringify(args)}`);
      }
    }));

  test("isolation: another client's stored completion looks like one that does not exist", { timeout: 60_000 }, () => withService({}, async (service) => {
    const alice = await pairClient(service, ['responses'], 'alice');
    const bob = await pairClient(service, ['responses'], 'bob');
    const as = (token: string) => ({ url: service.url, token });
    const created = await json<ChatCompletionObject>(await chat(as(alice.token), { max_completion_tokens: 4, store: true }));
    const taskId = (await json<{ data: TaskObject[] }>(await api(as(alice.token), '/v1/tasks'))).data[0]!.id;
    for (const [method, path, body] of [
      ['GET', `/v1/chat/completions/${created.id}`, undefined],
      ['GET', `/v1/chat/completions/${created.id}/messages`, undefined],
      ['POST', `/v1/chat/completions/${created.id}`, { metadata: {} }],
      ['DELETE', `/v1/chat/completions/${created.id}`, undefined],
      ['GET', `/v1/tasks/${taskId}/events`, undefined],
    ] as const) {
      await expectError(await api(as(bob.token), path, { method, ...(body ? { json: body } : {}) }), 404, 'not_found', method === 'GET' && path.includes('/tasks/') ? 'id' : 'completion_id');
    }
    assert.deepEqual((await json<{ data: unknown[] }>(await api(as(bob.token), '/v1/chat/completions'))).data, []);
    // A cursor naming no visible completion is refused as the tasks list refuses one (LMSP 7.1).
    await expectError(await api(as(bob.token), `/v1/chat/completions?after=${created.id}`), 400, 'invalid_request', 'after');
    assert.equal((await json<{ data: unknown[] }>(await api(as(alice.token), '/v1/chat/completions'))).data.length, 1);
    assert.equal((await api(service, `/v1/chat/completions/${created.id}`)).status, 200, 'admin sees every client\'s');
  }));
});
