/**
 * A chat completion is a durable task (LMSP 13, 7.5): the service is killed with SIGKILL in the
 * middle of a streamed chat completion; under `on_restart: resume` the task resumes after the
 * restart and its stored completion equals an uninterrupted run's; under `retry` it starts again
 * and ends the same; under the default (`fail`) it fails with `server_restarted`.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ChatCompletionChunk, ChatCompletionObject } from '../../src/api/chat-completions.js';
import type { TaskEvent, TaskObject } from '../../src/api/types.js';
import { syntheticByteTokenId } from '../../src/engine/synthetic-model.js';
import { api, waitFor, withService, type TestService } from '../helpers/service.js';
import { readSse } from '../helpers/sse.js';

const MAX_TOKENS = 300;
const BODY = {
  model: 'lmsp-tiny',
  messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Tell me a long story about a lighthouse.' }],
  max_completion_tokens: MAX_TOKENS,
  seed: 424242,
  temperature: 1,
  store: true,
};

async function json<T>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

async function eventsOf(service: TestService, taskId: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  let after = 0;
  for (;;) {
    const page = await json<{ data: TaskEvent[]; has_more: boolean }>(await api(service, `/v1/tasks/${taskId}/events?starting_after=${after}&limit=1000`));
    events.push(...page.data);
    if (!page.has_more) return events;
    after = page.data.at(-1)!.sequence_number;
  }
}

/** Starts a streamed create, reads its chunks until `killAt` tokens are committed, then kills the service. */
async function streamAndKill(service: TestService, body: object, killAt: number): Promise<{ taskId: string; completionId: string; streamed: string }> {
  const controller = new AbortController();
  const response = await api(service, '/v1/chat/completions', { method: 'POST', json: { ...body, stream: true }, signal: controller.signal });
  assert.equal(response.status, 200);
  const taskId = response.headers.get('lmsp-task-id')!;
  let completionId = '';
  let streamed = '';
  const reading = (async () => {
    for await (const frame of readSse(response)) {
      const chunk = JSON.parse(frame.data) as ChatCompletionChunk;
      completionId = chunk.id;
      streamed += chunk.choices[0]?.delta.content ?? '';
    }
  })().catch(() => undefined);
  await waitFor(async () => completionId !== '' && ((await json<ChatCompletionObject>(await api(service, `/v1/chat/completions/${completionId}`))).usage.completion_tokens >= killAt),
    { what: `${killAt} tokens` });
  await service.kill();
  controller.abort();
  await reading;
  return { taskId, completionId, streamed };
}

describe('chat completions survive SIGKILL (LMSP 13, 7.5)', () => {
  // Penalties count every token generated before, the resumed ones too, and a logit bias applies
  // after the restart as before: the resumed run samples as the uninterrupted one does.
  const biased = { frequency_penalty: 1.5, presence_penalty: 0.5, logit_bias: { [syntheticByteTokenId(0x65)]: 6, [syntheticByteTokenId(0x6f)]: -100 } };
  for (const [title, extra] of [['', {}], [' (with frequency and presence penalties and a logit bias)', biased]] as const) {
    test(`on_restart resume: the resumed completion equals an uninterrupted run${title}`, { timeout: 180_000 }, () =>
      withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '8' } }, async (first) => {
        const body = { ...BODY, ...extra };
        const reference = await json<ChatCompletionObject>(await api(first, '/v1/chat/completions', { method: 'POST', json: body }));
        const expected = reference.choices[0]!.message.content!;
        assert.equal(reference.usage.completion_tokens, MAX_TOKENS);
        if (Object.keys(extra).length > 0) {
          const plain = await json<ChatCompletionObject>(await api(first, '/v1/chat/completions', { method: 'POST', json: BODY }));
          assert.notEqual(plain.choices[0]!.message.content, expected, 'the penalties and the bias change the text');
        }

        const { taskId, completionId, streamed } = await streamAndKill(first, { ...body, on_restart: 'resume' }, 120);
        assert.ok(expected.startsWith(streamed), 'what was streamed before the kill is the start of the text');
        const service = await first.restart();
        const task = await waitFor(async () => {
          const current = await json<TaskObject>(await api(service, `/v1/tasks/${taskId}`));
          return current.status === 'completed' ? current : null;
        }, { what: 'the resumed task to complete' });
        assert.equal(task.kind, 'chat_completion');
        assert.equal(task.attempt, 1);

        const stored = await json<ChatCompletionObject>(await api(service, `/v1/chat/completions/${completionId}`));
        assert.equal(stored.choices[0]!.message.content, expected, 'the same text as an uninterrupted run');
        assert.equal(stored.choices[0]!.finish_reason, 'length');
        assert.equal(stored.usage.completion_tokens, MAX_TOKENS);

        const events = await eventsOf(service, taskId);
        events.forEach((event, index) => assert.equal(event.sequence_number, index + 1, 'gapless from 1 across the restart'));
        const resumed = events.find((event) => event.type === 'chat.completion.resumed');
        assert.ok(resumed, `resumed, not restarted: ${events.map((event) => event.type).filter((type) => type !== 'chat.completion.chunk').join(', ')}`);
        assert.ok((resumed.completion_tokens as number) >= 120);
        assert.equal(events.at(-1)!.type, 'chat.completion.completed');
        const chunks = events.filter((event) => event.type === 'chat.completion.chunk').map((event) => event.chunk as ChatCompletionChunk);
        assert.equal(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join(''), expected, 'the chunks add up to the text: nothing lost or repeated');
        assert.equal((events.at(-1)!.completion as ChatCompletionObject).choices[0]!.message.content, expected);
      }));
  }

  test('on_restart retry: the task starts again as attempt 2 and ends with the same text', { timeout: 180_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '8' } }, async (first) => {
      const body = { ...BODY, max_completion_tokens: 120 };
      const expected = (await json<ChatCompletionObject>(await api(first, '/v1/chat/completions', { method: 'POST', json: body }))).choices[0]!.message.content!;
      const { taskId, completionId } = await streamAndKill(first, { ...body, on_restart: 'retry' }, 40);
      const service = await first.restart();
      const task = await waitFor(async () => {
        const current = await json<TaskObject>(await api(service, `/v1/tasks/${taskId}`));
        return current.status === 'completed' ? current : null;
      }, { what: 'the retried task to complete' });
      assert.equal(task.attempt, 2);
      const stored = await json<ChatCompletionObject>(await api(service, `/v1/chat/completions/${completionId}`));
      assert.equal(stored.choices[0]!.message.content, expected);
      const events = await eventsOf(service, taskId);
      events.forEach((event, index) => assert.equal(event.sequence_number, index + 1));
      const requeued = events.findIndex((event) => event.type === 'chat.completion.queued');
      assert.ok(requeued > 0, 'queued again at startup');
      const attempt2 = events.slice(requeued).filter((event) => event.type === 'chat.completion.chunk').map((event) => event.chunk as ChatCompletionChunk);
      assert.deepEqual(attempt2[0]!.choices[0]!.delta, { role: 'assistant', content: '', refusal: null }, 'the new attempt starts its message again');
      assert.equal(attempt2.map((chunk) => chunk.choices[0]?.delta.content ?? '').join(''), expected);
    }));

  test('a forced tool call resumed in the middle of its arguments: named once, its deltas add up to valid arguments', { timeout: 180_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' } }, async (first) => {
      const body = {
        ...BODY, max_completion_tokens: 400, parallel_tool_calls: false,
        tools: [{ type: 'function', function: { name: 'note', parameters: { type: 'object', properties: { text: { type: 'string', minLength: 120, maxLength: 140 } }, required: ['text'], additionalProperties: false } } }],
        tool_choice: { type: 'function', function: { name: 'note' } },
      };
      const reference = await json<ChatCompletionObject>(await api(first, '/v1/chat/completions', { method: 'POST', json: body }));
      const expected = reference.choices[0]!.message.tool_calls![0]!.function.arguments;
      const { taskId, completionId } = await streamAndKill(first, { ...body, on_restart: 'resume' }, 60);
      const service = await first.restart();
      await waitFor(async () => (await json<TaskObject>(await api(service, `/v1/tasks/${taskId}`))).status === 'completed', { what: 'the resumed call to complete' });
      const events = await eventsOf(service, taskId);
      const resumedAt = events.findIndex((event) => event.type === 'chat.completion.resumed');
      assert.ok(resumedAt > 0, 'resumed');
      const hasToolDelta = (event: TaskEvent) => event.type === 'chat.completion.chunk' && ((event.chunk as ChatCompletionChunk).choices[0]?.delta.tool_calls ?? []).length > 0;
      assert.ok(events.slice(0, resumedAt).some(hasToolDelta) && events.slice(resumedAt).some(hasToolDelta), 'killed in the middle of the call');
      const deltas = events.filter((event) => event.type === 'chat.completion.chunk')
        .flatMap((event) => (event.chunk as ChatCompletionChunk).choices[0]?.delta.tool_calls ?? []);
      assert.equal(deltas.filter((delta) => delta.id !== undefined).length, 1, 'the call is named once, before and after the restart');
      assert.equal(deltas.filter((delta) => delta.function?.name !== undefined).length, 1);
      const args = deltas.map((delta) => delta.function?.arguments ?? '').join('');
      assert.equal(args, expected, 'the same arguments as an uninterrupted run');
      assert.ok((JSON.parse(args) as { text: string }).text.length >= 120);
      const stored = await json<ChatCompletionObject>(await api(service, `/v1/chat/completions/${completionId}`));
      assert.equal(stored.choices[0]!.finish_reason, 'tool_calls');
      assert.equal(stored.choices[0]!.message.tool_calls![0]!.id, deltas[0]!.id);
      assert.equal(stored.choices[0]!.message.tool_calls![0]!.function.arguments, expected);
    }));

  test('the default on_restart (fail): a killed chat completion fails with server_restarted', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '8' } }, async (first) => {
      const { taskId } = await streamAndKill(first, BODY, 20);
      const service = await first.restart();
      const task = await json<TaskObject>(await api(service, `/v1/tasks/${taskId}`));
      assert.equal(task.status, 'failed');
      assert.equal(task.error?.code, 'server_restarted');
      const events = await eventsOf(service, taskId);
      assert.equal(events.at(-1)!.type, 'chat.completion.failed');
      assert.deepEqual(events.at(-1)!.error, task.error, 'the event says why, as response.failed does');
      assert.equal((events.at(-1)!.error as { code: string }).code, 'server_restarted');
    }));
});
