/**
 * LangChain JS (`@langchain/openai` ChatOpenAI) on POST /v1/chat/completions of the real service
 * (LMSP 13, 6.1, 6.2): invoke, stream, withStructuredOutput (json_schema and function calling)
 * and bindTools with a forced tool. The built-in model's text means nothing; every message must
 * still be well formed, and every object and call's arguments valid against its schema (Ajv).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';
import { pairClient, withService, type TestService } from '../helpers/service.js';
import { schemaViolation } from '../helpers/schema-validator.js';

const PERSON = {
  title: 'person',
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    tags: { type: 'array', items: { type: 'string', enum: ['cat', 'dog', 'fish'] }, maxItems: 3 },
  },
  required: ['name', 'age', 'tags'],
  additionalProperties: false,
};

const ADD = {
  type: 'object',
  properties: { a: { type: 'integer', minimum: 0, maximum: 9 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
  required: ['a', 'b'],
  additionalProperties: false,
};

function assertValid(schema: unknown, value: unknown): void {
  assert.equal(schemaViolation(schema, JSON.stringify(value)), null, JSON.stringify(value));
}

/** A factory of ChatOpenAI on the service, and the requests they sent (watched only, sent unchanged). */
async function chatModels(service: TestService) {
  const { token } = await pairClient(service, ['responses'], 'langchain');
  const sent: Array<{ url: string; body: Record<string, unknown> }> = [];
  const configuration = {
    baseURL: `${service.url}/v1`,
    fetch: async (url: string | URL | Request, init?: RequestInit) => {
      if (typeof init?.body === 'string') sent.push({ url: String(url), body: JSON.parse(init.body) as Record<string, unknown> });
      return fetch(url, init);
    },
  };
  const make = (maxTokens: number) => new ChatOpenAI({ model: 'lmsp-tiny', apiKey: token, maxTokens, maxRetries: 0, configuration });
  return { make, sent };
}

describe('LangChain ChatOpenAI: chat', () => {
  test('invoke and stream: an AIMessage with finish reason and usage; the stream joins to the same text for the same seed', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      const { make, sent } = await chatModels(service);
      const chat = make(20);
      const messages = [new SystemMessage('Be brief.'), new HumanMessage('Say hello.')];
      const message = await chat.invoke(messages, { seed: 3 });
      assert.equal(sent.at(-1)!.url, `${service.url}/v1/chat/completions`);
      assert.ok(message instanceof AIMessage);
      assert.equal(typeof message.content, 'string');
      assert.ok((message.content as string).length > 0);
      assert.match(message.id ?? '', /^chatcmpl-/);
      assert.equal(message.response_metadata.finish_reason, 'length');
      assert.equal(message.response_metadata.model_name, 'lmsp-tiny');
      assert.equal(message.usage_metadata?.output_tokens, 20);
      assert.ok(message.usage_metadata!.input_tokens > 0);
      assert.deepEqual(message.tool_calls, []);

      let text = '';
      let chunks = 0;
      let joined: AIMessageChunk | undefined;
      for await (const chunk of await chat.stream(messages, { seed: 3 })) {
        assert.ok(chunk instanceof AIMessageChunk);
        text += chunk.content as string;
        chunks += 1;
        joined = joined ? joined.concat(chunk) : chunk;
      }
      assert.equal(sent.at(-1)!.body.stream, true);
      assert.ok(chunks > 1, 'more than one chunk');
      assert.equal(text, message.content, 'the same seed, the same text');
      assert.equal(joined!.content, message.content);
      assert.equal(joined!.usage_metadata?.output_tokens, 20, 'the usage chunk');
      assert.equal(joined!.response_metadata.finish_reason, 'length');
    }));

  test('withStructuredOutput: json_schema and function calling give objects valid against the schema', { timeout: 180_000 }, () =>
    withService({}, async (service) => {
      const { make, sent } = await chatModels(service);
      for (const [prompt, method] of [['Describe a person.', 'jsonSchema'], ['Describe another.', 'jsonSchema'], ['Describe a person.', 'functionCalling']] as const) {
        const structured = make(400).withStructuredOutput(PERSON, { method });
        const object = await structured.invoke(prompt);
        const body = sent.at(-1)!.body;
        if (method === 'jsonSchema') assert.equal((body.response_format as { type: string }).type, 'json_schema');
        else assert.deepEqual(body.tool_choice, { type: 'function', function: { name: 'person' } });
        assertValid(PERSON, object);
      }
      // zod, with the raw message beside the parsed object.
      const zodPerson = z.object({ name: z.string().min(1).max(10), score: z.number().int().min(1).max(5), pet: z.enum(['cat', 'dog']) });
      const { raw, parsed } = await make(400).withStructuredOutput(zodPerson, { name: 'person', includeRaw: true }).invoke('Describe a person.');
      assert.ok(raw instanceof AIMessage);
      assert.deepEqual(zodPerson.parse(parsed), parsed);
    }));

  test('bindTools with a forced tool: tool calls with valid args, then a tool message continues the conversation', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      const { make, sent } = await chatModels(service);
      const addTool = { type: 'function' as const, function: { name: 'add', description: 'Adds two digits.', parameters: ADD } };
      const bound = make(2000).bindTools([addTool], { tool_choice: 'add' });
      const question = new HumanMessage('What is 2 + 3?');
      const message = await bound.invoke([question], { seed: 1 });
      assert.deepEqual(sent.at(-1)!.body.tool_choice, { type: 'function', function: { name: 'add' } });
      assert.equal(message.response_metadata.finish_reason, 'tool_calls');
      assert.ok(message.tool_calls!.length >= 1);
      assert.deepEqual(message.invalid_tool_calls ?? [], []);
      for (const call of message.tool_calls!) {
        assert.equal(call.name, 'add');
        assert.match(call.id ?? '', /^call_/);
        assertValid(ADD, call.args);
      }

      const results = message.tool_calls!.map((call) => new ToolMessage({ tool_call_id: call.id!, content: String((call.args.a as number) + (call.args.b as number)) }));
      const answer = await make(10).bindTools([addTool], { tool_choice: 'none' }).invoke([question, message, ...results], { seed: 1 });
      const body = sent.at(-1)!.body as { messages: Array<{ role: string; tool_call_id?: string }> };
      assert.deepEqual(body.messages.filter((item) => item.role === 'tool').map((item) => item.tool_call_id), message.tool_calls!.map((call) => call.id));
      assert.equal(typeof answer.content, 'string');
      assert.deepEqual(answer.tool_calls, []);
      assert.equal(answer.response_metadata.finish_reason, 'length');
    }));
});
