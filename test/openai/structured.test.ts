/**
 * Structured output and tools through the official `openai` package (LMSP 6.1, 6.2), unchanged
 * but for baseURL and apiKey: responses.parse with a Zod format, forced tool calls, the stream
 * helper's function call events, and a two-step tool loop through previous_response_id.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { LengthFinishReasonError } from 'openai/error';
import { zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import type { FunctionTool, ResponseFunctionToolCall } from 'openai/resources/responses/responses';
import { z } from 'zod';
import { pairClient, startService, type TestService } from '../helpers/service.js';
import { schemaViolation } from '../helpers/schema-validator.js';

const Person = z.object({
  name: z.string().min(1).max(10),
  age: z.number().int().min(0).max(120),
  member: z.boolean(),
  colour: z.enum(['red', 'green', 'blue']),
});

const ADD: FunctionTool = {
  type: 'function', name: 'add', description: 'Adds two integers', strict: true,
  parameters: { type: 'object', properties: { a: { type: 'integer', minimum: -99, maximum: 99 }, b: { type: 'integer', minimum: -99, maximum: 99 } }, required: ['a', 'b'], additionalProperties: false },
};
const WEATHER: FunctionTool = {
  type: 'function', name: 'get_weather', strict: true,
  parameters: { type: 'object', properties: { city: { type: 'string', minLength: 2, maxLength: 12 } }, required: ['city'], additionalProperties: false },
};

let service: TestService;
let client: OpenAI;

function callsOf(response: { output: Array<{ type: string }> }): ResponseFunctionToolCall[] {
  return response.output.filter((item): item is ResponseFunctionToolCall => item.type === 'function_call');
}

describe('structured output and tools through the openai package', () => {
  before(async () => {
    service = await startService();
    const { token } = await pairClient(service, ['responses', 'models:read'], 'openai-structured');
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: token, maxRetries: 0 });
  });
  after(async () => {
    await service.kill();
  });

  test('responses.parse with zodTextFormat gives output_parsed, valid against the Zod schema', { timeout: 120_000 }, async () => {
    for (const seed of [1, 2, 3]) {
      const response = await client.responses.parse({
        model: 'lmsp-tiny', input: 'Describe a person.', text: { format: zodTextFormat(Person, 'person') }, max_output_tokens: 400, seed,
      } as Parameters<typeof client.responses.parse>[0] & { seed: number });
      assert.equal(response.status, 'completed');
      assert.ok(response.output_parsed, response.output_text);
      assert.deepEqual(Person.parse(response.output_parsed), response.output_parsed);
      assert.equal(response.text?.format?.type, 'json_schema');
    }
  });

  test('responses.parse with Zod\'s string formats (format and pattern together): valid e-mails, uuids, dates, addresses', { timeout: 180_000 }, async () => {
    const Contact = z.object({
      email: z.email().max(40), id: z.uuid(), seen: z.iso.datetime(), born: z.iso.date(), ip: z.ipv4(), site: z.hostname(),
    });
    let parsed = 0;
    for (const seed of [1, 2, 3, 4]) {
      const response = await client.responses.parse({
        model: 'lmsp-tiny', input: 'A contact card.', text: { format: zodTextFormat(Contact, 'contact') }, max_output_tokens: 600, seed,
      } as Parameters<typeof client.responses.parse>[0] & { seed: number });
      if (response.status !== 'completed') continue;
      parsed += 1;
      assert.ok(response.output_parsed, response.output_text);
      assert.deepEqual(Contact.parse(response.output_parsed), response.output_parsed, response.output_text);
    }
    assert.ok(parsed >= 2, `${parsed} of 4 seeds completed within 600 tokens`);
  });

  test('responses.parse with a Zod record (propertyNames every key satisfies): a map of valid values', { timeout: 120_000 }, async () => {
    const Scores = z.object({ scores: z.record(z.string(), z.number().int().min(0).max(9)) });
    const format = zodTextFormat(Scores, 'scores');
    assert.ok(JSON.stringify(format).includes('propertyNames'), 'Zod writes propertyNames for a record');
    const response = await client.responses.parse({
      model: 'lmsp-tiny', input: 'Scores by name.', text: { format }, max_output_tokens: 400, seed: 5,
    } as Parameters<typeof client.responses.parse>[0] & { seed: number });
    assert.equal(response.status, 'completed', response.output_text);
    assert.deepEqual(Scores.parse(response.output_parsed), response.output_parsed);
  });

  test('responses.parse with a record keyed by an enum, an intersection of loose objects and a base64 field, as Zod writes them', { timeout: 120_000 }, async () => {
    const Shape = z.object({
      votes: z.record(z.enum(['yes', 'no']), z.number().int().min(0).max(9)),
      tagged: z.intersection(z.looseObject({ a: z.boolean() }), z.looseObject({ b: z.boolean() })),
      blob: z.base64().max(8),
    });
    const format = zodTextFormat(Shape, 'shape');
    const written = JSON.stringify(format);
    for (const part of ['propertyNames', 'allOf', '"additionalProperties":{}', '^$|^']) assert.ok(written.includes(part), `Zod writes ${part}`);
    const response = await client.responses.parse({
      model: 'lmsp-tiny', input: 'A shape.', text: { format }, max_output_tokens: 400, seed: 3,
    } as Parameters<typeof client.responses.parse>[0] & { seed: number });
    assert.equal(response.status, 'completed', response.output_text);
    const parsed = Shape.parse(response.output_parsed);
    assert.deepEqual(Object.keys(parsed.votes).sort(), ['no', 'yes'], 'z.record of an enum needs every key');
    assert.deepEqual(response.output_parsed, parsed);
  });

  test('responses.create with tools and a forced tool_choice: function_call items with valid arguments', { timeout: 120_000 }, async () => {
    const response = await client.responses.create({
      model: 'lmsp-tiny', input: 'What is 2 + 3?', tools: [ADD, WEATHER], tool_choice: { type: 'function', name: 'add' }, parallel_tool_calls: false, max_output_tokens: 300,
    });
    assert.equal(response.status, 'completed');
    const calls = callsOf(response);
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.name, 'add');
    assert.match(calls[0]!.call_id, /^call_/);
    assert.equal(schemaViolation(ADD.parameters, calls[0]!.arguments), null);
    assert.equal(response.output_text, '', 'no message text');
    const required = await client.responses.create({ model: 'lmsp-tiny', input: 'Weather?', tools: [ADD, WEATHER], tool_choice: 'required', max_output_tokens: 500 });
    const made = callsOf(required);
    assert.ok(made.length >= 1);
    for (const call of made.filter((item) => item.status === 'completed')) {
      assert.equal(schemaViolation((call.name === 'add' ? ADD : WEATHER).parameters, call.arguments), null, call.arguments);
    }
  });

  test('responses.stream: function call events, and the final response built from them', { timeout: 120_000 }, async () => {
    const stream = client.responses.stream({
      model: 'lmsp-tiny', input: 'Weather in Oslo?', tools: [WEATHER], tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 300,
    });
    const types: string[] = [];
    let deltas = '';
    stream.on('event', (event) => types.push(event.type));
    stream.on('response.function_call_arguments.delta', (event) => {
      deltas += event.delta;
    });
    const final = await stream.finalResponse();
    assert.equal(final.status, 'completed');
    const [call] = callsOf(final);
    assert.ok(call);
    assert.equal(deltas, call.arguments);
    assert.equal(schemaViolation(WEATHER.parameters, call.arguments), null);
    const wire = types.filter((type) => type !== 'response.loading' && type !== 'response.function_call_syntax');
    assert.deepEqual(wire.slice(0, 3), ['response.created', 'response.in_progress', 'response.output_item.added']);
    assert.deepEqual(wire.slice(-3), ['response.function_call_arguments.done', 'response.output_item.done', 'response.completed']);
  });

  test('a two-step tool loop through previous_response_id: call, function_call_output, final answer', { timeout: 120_000 }, async () => {
    const first = await client.responses.create({
      model: 'lmsp-tiny', input: 'What is 2 + 3? Use the tool.', tools: [ADD], tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 300,
    });
    const [call] = callsOf(first);
    assert.ok(call);
    const args = JSON.parse(call.arguments) as { a: number; b: number };
    const second = await client.responses.create({
      model: 'lmsp-tiny', previous_response_id: first.id, tools: [ADD], tool_choice: 'none', max_output_tokens: 12,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ sum: args.a + args.b }) }],
    });
    assert.equal(second.previous_response_id, first.id);
    assert.equal(callsOf(second).length, 0);
    assert.ok(second.output_text.length > 0, 'the final answer is a message');
    const items = [];
    for await (const item of client.responses.inputItems.list(second.id)) items.push(item);
    assert.deepEqual(items.map((item) => item.type), ['function_call_output']);
  });

  test('a value or call that the last allowed token completes is whole: stop, completed, parsed; one token less is cut', { timeout: 180_000 }, async () => {
    const Flag = z.object({ a: z.boolean() });
    const chat = (limit: number) => client.chat.completions.parse({
      model: 'lmsp-tiny', seed: 5, messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: limit, response_format: zodResponseFormat(Flag, 'flag'),
    });
    const roomy = await chat(200);
    assert.equal(roomy.choices[0]!.finish_reason, 'stop');
    const used = roomy.usage!.completion_tokens;
    const exact = await chat(used);
    assert.equal(exact.choices[0]!.finish_reason, 'stop', `with max_completion_tokens ${used}, the tokens the value takes`);
    assert.equal(exact.choices[0]!.message.content, roomy.choices[0]!.message.content);
    assert.deepEqual(exact.choices[0]!.message.parsed, roomy.choices[0]!.message.parsed);
    await assert.rejects(chat(used - 1), LengthFinishReasonError, 'one token less cuts the value');

    const call = (limit: number) => client.responses.create({
      model: 'lmsp-tiny', input: 'Add.', tools: [ADD], tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: limit, seed: 1,
    } as Parameters<typeof client.responses.create>[0] & { seed: number, stream?: false });
    const whole = await call(300);
    assert.equal(whole.status, 'completed');
    const tokens = whole.usage!.output_tokens;
    const atLimit = await call(tokens);
    assert.deepEqual([atLimit.status, atLimit.incomplete_details], ['completed', null], `with max_output_tokens ${tokens}`);
    assert.equal(callsOf(atLimit)[0]?.arguments, callsOf(whole)[0]?.arguments);
    const cut = await call(tokens - 1);
    assert.deepEqual([cut.status, cut.incomplete_details], ['incomplete', { reason: 'max_output_tokens' }]);
  });
});
