/**
 * The official `openai` package (6.30.1), unchanged but for baseURL and apiKey, against the real
 * service: every Chat Completions call a client makes (LMSP 13), structured output and tools
 * (LMSP 6.1, 6.2) included.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI, { BadRequestError, NotFoundError } from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import type { ChatCompletionChunk, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { z } from 'zod';
import { pairClient, withService, type TestService } from '../helpers/service.js';

async function openai(service: TestService, name = 'openai-sdk'): Promise<OpenAI> {
  const { token } = await pairClient(service, ['responses', 'models:read'], name);
  return new OpenAI({ baseURL: `${service.url}/v1`, apiKey: token, maxRetries: 0 });
}

const messages: ChatCompletionMessageParam[] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }];

describe('the official openai package: chat completions', () => {
  test('chat.completions.create, plain and streamed with include_usage', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    const { data: completion, response } = await client.chat.completions.create({ model: 'lmsp-tiny', messages, max_completion_tokens: 12, seed: 3 }).withResponse();
    assert.match(response.headers.get('lmsp-task-id') ?? '', /^task_/);
    assert.equal(completion.object, 'chat.completion');
    assert.equal(completion.choices[0]!.finish_reason, 'length');
    assert.equal(completion.usage?.completion_tokens, 12);

    const stream = await client.chat.completions.create({
      model: 'lmsp-tiny', messages, max_completion_tokens: 12, seed: 3, stream: true, stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.equal(chunks[0]!.choices[0]!.delta.role, 'assistant');
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
    assert.equal(text, completion.choices[0]!.message.content, 'the same seed, the same text, streamed or not');
    assert.equal(chunks.at(-2)!.choices[0]!.finish_reason, 'length');
    assert.deepEqual(chunks.at(-1)!.choices, []);
    assert.equal(chunks.at(-1)!.usage?.completion_tokens, 12);
  }));

  test('chat.completions.stream(...).finalChatCompletion() builds the completion from the chunks', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    let deltas = '';
    const runner = client.chat.completions.stream({ model: 'lmsp-tiny', messages, max_completion_tokens: 20, seed: 8 })
      .on('content', (delta) => {
        deltas += delta;
      });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0]!.message.content, deltas);
    assert.equal(final.choices[0]!.finish_reason, 'length');
    assert.equal(final.choices[0]!.message.role, 'assistant');
    assert.ok(deltas.length > 0);
  }));

  test('stored completions: list, retrieve, messages.list, update, delete', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    const created = await client.chat.completions.create({ model: 'lmsp-tiny', messages, max_completion_tokens: 6, store: true, metadata: { topic: 'greeting' } });
    await client.chat.completions.create({ model: 'lmsp-tiny', messages, max_completion_tokens: 6, store: true, metadata: { topic: 'other' } });
    const listed = [];
    for await (const item of client.chat.completions.list({ metadata: { topic: 'greeting' } })) listed.push(item.id);
    assert.deepEqual(listed, [created.id]);
    const all = [];
    for await (const item of client.chat.completions.list({ limit: 1 })) all.push(item.id);
    assert.equal(all.length, 2, 'the SDK pages through with after');
    const retrieved = await client.chat.completions.retrieve(created.id);
    assert.equal(retrieved.choices[0]!.message.content, created.choices[0]!.message.content);
    const stored = [];
    for await (const message of client.chat.completions.messages.list(created.id)) stored.push({ role: message.role, content: message.content });
    assert.deepEqual(stored, [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }]);
    const updated = await client.chat.completions.update(created.id, { metadata: { topic: 'changed' } });
    assert.deepEqual((updated as unknown as { metadata: unknown }).metadata, { topic: 'changed' });
    const deleted = await client.chat.completions.delete(created.id);
    assert.deepEqual(deleted, { id: created.id, object: 'chat.completion.deleted', deleted: true });
    await assert.rejects(client.chat.completions.retrieve(created.id), NotFoundError);
  }));

  test('chat.completions.parse with zodResponseFormat returns a parsed, schema-valid object', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    const Answer = z.object({ city: z.string().max(12), sunny: z.boolean(), rank: z.number().int().min(1).max(5) });
    for (const seed of [1, 2]) {
      const completion = await client.chat.completions.parse({
        model: 'lmsp-tiny', messages, seed, max_completion_tokens: 400, response_format: zodResponseFormat(Answer, 'answer'),
      });
      const message = completion.choices[0]!.message;
      assert.equal(completion.choices[0]!.finish_reason, 'stop');
      assert.ok(message.parsed, message.content ?? '');
      assert.deepEqual(Answer.parse(message.parsed), message.parsed);
    }
    await assert.rejects(client.chat.completions.create({
      model: 'lmsp-tiny', messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '(a)\\1' } } },
    }), (error: unknown) => error instanceof BadRequestError && error.code === 'unsupported_schema' && error.param === 'response_format.json_schema.schema');
  }));

  test('a forced call streams tool_calls deltas with index, and a tool message continues the conversation', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    const tools = [zodFunction({ name: 'add', parameters: z.object({ a: z.number().int().min(-9).max(9), b: z.number().int().min(-9).max(9) }) })];
    const stream = await client.chat.completions.create({
      model: 'lmsp-tiny', messages, tools, tool_choice: 'required', parallel_tool_calls: false, stream: true, seed: 4, max_completion_tokens: 300, store: true,
    });
    const deltas: NonNullable<ChatCompletionChunk['choices'][0]['delta']['tool_calls']> = [];
    let finish: string | null = null;
    let id = '';
    for await (const chunk of stream) {
      id = chunk.id;
      deltas.push(...(chunk.choices[0]?.delta.tool_calls ?? []));
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, 'tool_calls');
    assert.ok(deltas.length >= 1);
    assert.ok(deltas.every((delta) => delta.index === 0));
    assert.match(deltas[0]!.id ?? '', /^call_/);
    assert.equal(deltas[0]!.function?.name, 'add');
    assert.ok(deltas.slice(1).every((delta) => delta.id === undefined && delta.function?.name === undefined), 'only the first delta names the call');
    assert.equal(deltas[0]!.function?.arguments, '', 'as OpenAI streams it, the naming delta has empty arguments; the arguments follow');
    assert.ok(deltas.length >= 2);
    const args = deltas.map((delta) => delta.function?.arguments ?? '').join('');
    const stored = await client.chat.completions.retrieve(id);
    assert.equal(stored.choices[0]!.finish_reason, 'tool_calls');
    assert.equal(stored.choices[0]!.message.content, null);
    const call = stored.choices[0]!.message.tool_calls![0]!;
    assert.equal(call.id, deltas[0]!.id);
    assert.equal(call.type === 'function' && call.function.arguments, args);
    const parsed = JSON.parse(args) as { a: number; b: number };

    const next = await client.chat.completions.create({
      model: 'lmsp-tiny', tools, tool_choice: 'none', seed: 4, max_completion_tokens: 10,
      messages: [...messages, stored.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: String(parsed.a + parsed.b) }],
    });
    assert.equal(next.choices[0]!.finish_reason, 'length');
    assert.equal(next.choices[0]!.message.tool_calls, undefined);
    assert.ok((next.choices[0]!.message.content ?? '').length > 0);
  }));

  test('the runTools helper runs a two-step tool loop to the end', { timeout: 120_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    const calls: Array<{ city: string }> = [];
    const weather = zodFunction({
      name: 'get_weather',
      parameters: z.object({ city: z.string().min(1).max(8) }),
      function: (args: { city: string }) => {
        calls.push(args);
        return 'x'.repeat(200);
      },
    });
    // With `auto` and a JSON answer, lmsp-tiny's first character decides between a call and an
    // answer. Its content means nothing, so the seed and the tool's result were picked (once, by
    // trying) so that it calls first and answers once it has read the result: a two-step loop.
    const runner = client.chat.completions.runTools({
      model: 'lmsp-tiny', messages: [{ role: 'user', content: 'Weather?' }], tools: [weather], tool_choice: 'auto', parallel_tool_calls: false,
      response_format: { type: 'json_object' }, temperature: 2, seed: 6, max_completion_tokens: 400,
    });
    const content = await runner.finalContent();
    const transcript = runner.messages.map((message) => message.role);
    assert.deepEqual(transcript, ['user', 'assistant', 'tool', 'assistant'], JSON.stringify(runner.messages));
    assert.equal(calls.length, 1);
    assert.equal(typeof JSON.parse(content ?? ''), 'object');
    const completions = runner.allChatCompletions();
    assert.equal(completions[0]!.choices[0]!.finish_reason, 'tool_calls');
    assert.equal(completions.at(-1)!.choices[0]!.finish_reason, 'stop');
  }));
});
