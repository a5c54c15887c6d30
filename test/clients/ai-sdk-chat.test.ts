/**
 * The Vercel AI SDK (`ai` 6 with `@ai-sdk/openai-compatible` 2) on POST /v1/chat/completions of
 * the real service (LMSP 13, 6.1, 6.2): generateText, streamText, generateObject and streamObject
 * with a json_schema response_format, and generateText with a tool forced by toolChoice. The
 * built-in model's text means nothing; every call and object must still be well formed, and every
 * object valid against its schema (Ajv).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateObject, generateText, jsonSchema, streamObject, streamText, tool, type JSONSchema7 } from 'ai';
import { z } from 'zod';
import { pairClient, withService, type TestService } from '../helpers/service.js';
import { schemaViolation } from '../helpers/schema-validator.js';

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    tags: { type: 'array', items: { type: 'string', enum: ['cat', 'dog', 'fish'] }, maxItems: 3 },
  },
  required: ['name', 'age', 'tags'],
  additionalProperties: false,
} satisfies JSONSchema7;

const ADD = {
  type: 'object',
  properties: { a: { type: 'integer', minimum: 0, maximum: 9 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
  required: ['a', 'b'],
  additionalProperties: false,
} satisfies JSONSchema7;

function assertValid(schema: unknown, value: unknown): void {
  assert.equal(schemaViolation(schema, JSON.stringify(value)), null, JSON.stringify(value));
}

/** The provider, and the bodies it sent (watched only: each request goes to the service unchanged). */
async function provider(service: TestService) {
  const { token } = await pairClient(service, ['responses'], 'ai-sdk');
  const sent: Array<{ url: string; body: Record<string, unknown> }> = [];
  const lmsp = createOpenAICompatible({
    name: 'lmsp', baseURL: `${service.url}/v1`, apiKey: token, includeUsage: true, supportsStructuredOutputs: true,
    fetch: async (url, init) => {
      if (typeof init?.body === 'string') sent.push({ url: String(url), body: JSON.parse(init.body) as Record<string, unknown> });
      return fetch(url, init);
    },
  });
  return { model: lmsp.chatModel('lmsp-tiny'), sent };
}

describe('Vercel AI SDK: chat', () => {
  test('generateText and streamText: text, finish reason, usage; the stream is the same text for the same seed', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      const { model, sent } = await provider(service);
      const plain = await generateText({ model, system: 'Be brief.', prompt: 'Say hello.', maxOutputTokens: 20, seed: 7 });
      assert.equal(sent.at(-1)!.url, `${service.url}/v1/chat/completions`);
      assert.equal(typeof plain.text, 'string');
      assert.ok(plain.text.length > 0);
      assert.equal(plain.finishReason, 'length', 'lmsp-tiny never stops early');
      assert.equal(plain.usage.outputTokens, 20);
      assert.ok(plain.usage.inputTokens! > 0);
      assert.equal(plain.usage.totalTokens, plain.usage.inputTokens! + 20);
      assert.match(plain.response.id, /^chatcmpl-/);
      assert.equal(plain.response.modelId, 'lmsp-tiny');

      const streamed = streamText({ model, system: 'Be brief.', prompt: 'Say hello.', maxOutputTokens: 20, seed: 7 });
      const parts: string[] = [];
      for await (const part of streamed.textStream) parts.push(part);
      assert.ok(parts.length > 1, 'more than one delta');
      assert.equal(sent.at(-1)!.body.stream, true);
      assert.equal(parts.join(''), await streamed.text);
      assert.equal(await streamed.text, plain.text, 'the same seed, the same text');
      assert.equal(await streamed.finishReason, 'length');
      assert.deepEqual(await streamed.usage, plain.usage, 'stream_options.include_usage');
    }));

  test('generateObject and streamObject: a json_schema response_format, objects valid against the schema', { timeout: 180_000 }, () =>
    withService({}, async (service) => {
      const { model, sent } = await provider(service);
      for (const seed of [1, 2, 3]) {
        const { object, finishReason } = await generateObject({ model, schema: jsonSchema(PERSON), prompt: 'Describe a person.', maxOutputTokens: 400, seed });
        const format = sent.at(-1)!.body.response_format as { type: string; json_schema: { schema: unknown } };
        assert.equal(format.type, 'json_schema');
        assert.deepEqual(format.json_schema.schema, PERSON);
        assert.equal(finishReason, 'stop');
        assertValid(PERSON, object);
      }

      const streamed = streamObject({ model, schema: jsonSchema(PERSON), prompt: 'Describe a person.', maxOutputTokens: 400, seed: 4 });
      const partials: unknown[] = [];
      for await (const partial of streamed.partialObjectStream) partials.push(partial);
      assert.ok(partials.length >= 1);
      const object = await streamed.object;
      assertValid(PERSON, object);
      assert.deepEqual(partials.at(-1), object, 'the last partial object is the object');

      // zod, as most AI SDK code writes schemas.
      const zodPerson = z.object({ name: z.string().min(1).max(10), score: z.number().int().min(1).max(5), pet: z.enum(['cat', 'dog']) });
      const { object: fromZod } = await generateObject({ model, schema: zodPerson, prompt: 'Describe a person.', maxOutputTokens: 400, seed: 5 });
      assert.deepEqual(zodPerson.parse(fromZod), fromZod);
    }));

  test('generateText with a tool forced by toolChoice: well-formed calls with valid input', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      const { model, sent } = await provider(service);
      const tools = { add: tool({ description: 'Adds two digits.', inputSchema: jsonSchema(ADD) }) };
      const result = await generateText({ model, prompt: 'What is 2 + 3?', tools, toolChoice: { type: 'tool', toolName: 'add' }, maxOutputTokens: 2000, seed: 1 });
      assert.deepEqual(sent.at(-1)!.body.tool_choice, { type: 'function', function: { name: 'add' } });
      assert.equal(result.finishReason, 'tool-calls');
      assert.ok(result.toolCalls.length >= 1);
      const ids = new Set<string>();
      for (const call of result.toolCalls) {
        assert.equal(call.toolName, 'add');
        assert.match(call.toolCallId, /^call_/);
        ids.add(call.toolCallId);
        assertValid(ADD, call.input);
      }
      assert.equal(ids.size, result.toolCalls.length, 'each call its own id');

      // With an execute function and two steps, the results go back as tool messages and the model answers.
      let executed = 0;
      const withResults = await generateText({
        model, prompt: 'What is 2 + 3?', maxOutputTokens: 2000, seed: 2, toolChoice: 'required', stopWhen: ({ steps }) => steps.length >= 2,
        tools: { add: tool({ description: 'Adds two digits.', inputSchema: jsonSchema<{ a: number; b: number }>(ADD), execute: async ({ a, b }) => { executed += 1; return a + b; } }) },
        prepareStep: ({ stepNumber }) => (stepNumber === 1 ? { toolChoice: 'none', maxOutputTokens: 10 } : {}),
      });
      assert.equal(withResults.steps.length, 2);
      assert.equal(executed, withResults.steps[0]!.toolCalls.length);
      assert.ok(executed >= 1);
      const secondBody = sent.at(-1)!.body as { messages: Array<{ role: string }> };
      assert.ok(secondBody.messages.some((message) => message.role === 'tool'), 'the second request carries the tool results');
      assert.equal(withResults.steps[1]!.toolCalls.length, 0);
      assert.equal(typeof withResults.text, 'string');
    }));
});
