/**
 * Structured output and tools on `POST /v1/responses` (LMSP 6.1, 6.2), over raw HTTP against the
 * real service: the shapes of the request and the response, the errors, and the event order.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ResponseObject, TaskEvent } from '../../src/api/types.js';
import { api, startService, waitFor, type TestService } from '../helpers/service.js';
import { schemaViolation } from '../helpers/schema-validator.js';
import { collectSse } from '../helpers/sse.js';

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 },
  },
  required: ['name', 'age', 'tags'],
  additionalProperties: false,
};

interface ErrorAnswer {
  error: { code: string; param: string | null; message: string };
}

let service: TestService;

async function create(body: object): Promise<{ status: number; body: ResponseObject & ErrorAnswer }> {
  const response = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'Describe someone.', ...body } });
  return { status: response.status, body: (await response.json()) as ResponseObject & ErrorAnswer };
}

function messageText(response: ResponseObject): string {
  const message = (response.output as Array<{ type: string; content?: Array<{ text: string }> }>).find((item) => item.type === 'message');
  return message?.content?.[0]?.text ?? '';
}

export async function allEvents(target: TestService, taskId: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  let afterSeq = 0;
  for (;;) {
    const page = await target.client.taskEvents(taskId, afterSeq, 1000);
    events.push(...page.data);
    if (!page.has_more) return events;
    afterSeq = page.data.at(-1)!.sequence_number;
  }
}

describe('structured output on /v1/responses (LMSP 6.1)', () => {
  before(async () => {
    service = await startService();
  });
  after(async () => {
    await service.kill();
  });

  test('json_schema: the output text is valid against the schema, and text.format is shown as sent', { timeout: 120_000 }, async () => {
    for (const seed of [1, 2, 3]) {
      const format = { type: 'json_schema', name: 'person', schema: PERSON, strict: true };
      const { status, body } = await create({ text: { format }, max_output_tokens: 400, seed });
      assert.equal(status, 200);
      assert.equal(body.status, 'completed', 'a complete JSON value ends the generation');
      assert.deepEqual(body.text, { format });
      assert.equal(schemaViolation(PERSON, messageText(body)), null, messageText(body));
      const stored = await service.client.getResponse(body.id);
      assert.deepEqual(stored.text, { format });
      assert.equal(messageText(stored as ResponseObject), messageText(body));
    }
  });

  test('json_object: one JSON object', { timeout: 120_000 }, async () => {
    const { status, body } = await create({ text: { format: { type: 'json_object' } }, max_output_tokens: 300, seed: 5 });
    assert.equal(status, 200);
    assert.deepEqual(body.text, { format: { type: 'json_object' } });
    if (body.status === 'completed') {
      const value = JSON.parse(messageText(body)) as unknown;
      assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), messageText(body));
    } else {
      assert.equal(body.status, 'incomplete');
      assert.ok(messageText(body).startsWith('{'), messageText(body));
    }
  });

  test('without text.format the response shows {format: {type: "text"}}, and the tool fields at their defaults', async () => {
    const { body } = await create({ max_output_tokens: 2 });
    assert.deepEqual(body.text, { format: { type: 'text' } });
    assert.deepEqual(body.tools, []);
    assert.equal(body.tool_choice, 'auto');
    assert.equal(body.parallel_tool_calls, true);
  });

  test('cut by max_output_tokens: incomplete, with the partial JSON', { timeout: 60_000 }, async () => {
    const { body } = await create({ text: { format: { type: 'json_schema', name: 'person', schema: PERSON } }, max_output_tokens: 4, seed: 1 });
    assert.equal(body.status, 'incomplete');
    assert.deepEqual(body.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(body.usage?.output_tokens, 4);
    assert.ok(messageText(body).startsWith('{'));
    assert.notEqual(schemaViolation(PERSON, messageText(body)), null, 'four tokens cannot hold the whole object');
  });

  test('a keyword the grammar cannot enforce: 400 unsupported_schema naming it, with param text.format.schema', async () => {
    for (const [keyword, schema] of [
      ['not', { type: 'object', properties: { a: { not: { type: 'string' } } } }],
      ['patternProperties', { type: 'object', patternProperties: { '^x': { type: 'string' } } }],
    ] as const) {
      const { status, body } = await create({ text: { format: { type: 'json_schema', name: 'x', schema } } });
      assert.equal(status, 400);
      assert.equal(body.error.code, 'unsupported_schema');
      assert.equal(body.error.param, 'text.format.schema');
      assert.match(body.error.message, new RegExp(`'${keyword}'`));
    }
  });

  test('a format and tools that fit their grammar apart but not together under tool_choice auto: 400 size, on both APIs', async () => {
    const letters = 'abcdefghijklmnopqrstuvwxyz';
    const wide = (set: string) => {
      const properties = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`p${i}`, { type: 'string', pattern: `^[${set[0]}-${set[i + 1]}]{4000}$` }]));
      return { type: 'object', properties, required: Object.keys(properties) };
    };
    const format = { type: 'json_schema', name: 'x', schema: wide(letters) };
    const parameters = wide(letters.toUpperCase());
    // Apart, each is a grammar the size limit allows (a forced call writes no text beside it).
    assert.equal((await create({ text: { format }, max_output_tokens: 1 })).status, 200);
    assert.equal((await create({ tools: [{ type: 'function', name: 'f', parameters }], tool_choice: 'required', max_output_tokens: 1 })).status, 200);
    const together = await create({ text: { format }, tools: [{ type: 'function', name: 'f', parameters }], max_output_tokens: 1 });
    assert.equal(together.status, 400);
    assert.deepEqual([together.body.error.code, together.body.error.param], ['unsupported_schema', 'tools[0].parameters']);
    assert.match(together.body.error.message, /'size'.*text format's schema and the parameters of the tools/);
    const chat = await api(service, '/v1/chat/completions', { method: 'POST', json: {
      model: 'lmsp-tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: wide(letters) } },
      tools: [{ type: 'function', function: { name: 'f', parameters } }],
    } });
    assert.equal(chat.status, 400);
    const error = ((await chat.json()) as ErrorAnswer).error;
    assert.deepEqual([error.code, error.param], ['unsupported_schema', 'tools[0].function.parameters']);
  });

  test('null optional fields of a json_schema format (description, strict) are accepted, as for tools', async () => {
    const { status, body } = await create({ text: { format: { type: 'json_schema', name: 'p', schema: PERSON, description: null, strict: null } }, max_output_tokens: 3 });
    assert.equal(status, 200, JSON.stringify(body));
    assert.deepEqual(body.text, { format: { type: 'json_schema', name: 'p', schema: PERSON, strict: null } });
  });

  test('malformed text.format: 400 naming the field', async () => {
    const missingName = await create({ text: { format: { type: 'json_schema', schema: PERSON } } });
    assert.equal(missingName.status, 400);
    assert.equal(missingName.body.error.param, 'text.format.name');
    const missingSchema = await create({ text: { format: { type: 'json_schema', name: 'p' } } });
    assert.equal(missingSchema.status, 400);
    assert.equal(missingSchema.body.error.param, 'text.format.schema');
    const badType = await create({ text: { format: { type: 'yaml' } } });
    assert.equal(badType.status, 400);
    assert.match(badType.body.error.param ?? '', /^text\.format/);
  });
});

const WEATHER = {
  type: 'function', name: 'get_weather', description: 'Current weather',
  parameters: { type: 'object', properties: { city: { type: 'string', minLength: 2, maxLength: 12 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false },
};
const ADD = {
  type: 'function', name: 'add',
  parameters: { type: 'object', properties: { a: { type: 'integer', minimum: -99, maximum: 99 }, b: { type: 'integer', minimum: -99, maximum: 99 } }, required: ['a', 'b'], additionalProperties: false },
};
const TOOLS = [WEATHER, ADD];

interface CallItem {
  type: 'function_call';
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: string;
}

function callsOf(response: ResponseObject): CallItem[] {
  return (response.output as unknown as Array<{ type: string }>).filter((item): item is CallItem => item.type === 'function_call');
}

function parametersOf(name: string): object {
  return TOOLS.find((tool) => tool.name === name)!.parameters;
}

/**
 * The OpenAI order of a response's items in its log: each item added, its deltas, its done
 * events, before the next item starts; LMSP's own events (loading, call syntax) left out.
 */
function assertItemOrder(events: TaskEvent[], terminal: string): void {
  const types = events.map((event) => event.type).filter((type) => type !== 'response.loading' && type !== 'response.function_call_syntax');
  assert.deepEqual(types.slice(0, 2), ['response.created', 'response.in_progress']);
  assert.equal(types.at(-1), terminal);
  let at = 2;
  const body = types.slice(0, -1);
  while (at < body.length) {
    assert.equal(body[at], 'response.output_item.added', `an item starts at ${at}: ${body.join(', ')}`);
    const item = events.filter((event) => event.type === 'response.output_item.added')
      .find((event) => event.sequence_number === events.filter((e) => e.type !== 'response.loading' && e.type !== 'response.function_call_syntax')[at]!.sequence_number)!.item as { type: string };
    at++;
    if (item.type === 'message') {
      assert.equal(body[at++], 'response.content_part.added');
      while (body[at] === 'response.output_text.delta') at++;
      assert.deepEqual(body.slice(at, at + 3), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done']);
      at += 3;
    } else {
      assert.equal(item.type, 'function_call');
      while (body[at] === 'response.function_call_arguments.delta') at++;
      assert.deepEqual(body.slice(at, at + 2), ['response.function_call_arguments.done', 'response.output_item.done']);
      at += 2;
    }
  }
}

describe('tools on /v1/responses (LMSP 6.2)', () => {
  before(async () => {
    service = await startService();
  });
  after(async () => {
    await service.kill();
  });

  test('tool_choice required: only function_call items, each of a listed function with valid arguments, and their events in order', { timeout: 120_000 }, async () => {
    for (const seed of [1, 2]) {
      const { status, body } = await create({ tools: TOOLS, tool_choice: 'required', max_output_tokens: 600, seed });
      assert.equal(status, 200);
      // Up to 16 parallel calls may not fit in 600 tokens: then the last one is cut.
      assert.ok(body.status === 'completed' || body.status === 'incomplete', body.status);
      // As OpenAI's Responses API: a tool sent without `strict` is shown back strict.
      assert.deepEqual(body.tools, TOOLS.map((tool) => ({ description: null, strict: true, ...tool })));
      assert.equal(body.tool_choice, 'required');
      const calls = callsOf(body);
      assert.ok(calls.length >= 1);
      assert.equal(calls.length, body.output.length, 'no message: the model wrote only calls');
      for (const call of calls) {
        assert.match(call.id, /^fc_[0-9A-Za-z]{24}$/);
        assert.match(call.call_id, /^call_[0-9A-Za-z]{24}$/);
        if (call !== calls.at(-1) || body.status === 'completed') assert.equal(call.status, 'completed');
        if (call.status === 'completed') assert.equal(schemaViolation(parametersOf(call.name), call.arguments), null, call.arguments);
      }
      assert.equal(new Set(calls.map((call) => call.call_id)).size, calls.length, 'call ids are distinct');
      const events = await allEvents(service, body.task.id);
      events.forEach((event, index) => assert.equal(event.sequence_number, index + 1, 'gapless from 1'));
      assertItemOrder(events, body.status === 'completed' ? 'response.completed' : 'response.incomplete');
      assert.ok(!events.some((event) => event.type.startsWith('response.output_text') || event.type.startsWith('response.content_part')), 'no message events without message text');
      calls.forEach((call, index) => {
        const deltas = events.filter((event) => event.type === 'response.function_call_arguments.delta' && event.item_id === call.id);
        assert.equal(deltas.map((event) => event.delta).join(''), call.arguments, 'the deltas of a call add up to its arguments');
        assert.ok(deltas.every((event) => event.output_index === index));
        const done = events.find((event) => event.type === 'response.function_call_arguments.done' && event.item_id === call.id);
        assert.equal(done?.arguments, call.arguments);
      });
      const stored = await service.client.getResponse(body.id);
      assert.deepEqual(stored.output, body.output, 'GET shows the same items');
      const terminal = events.at(-1)!.response as ResponseObject;
      assert.deepEqual(terminal.output, body.output);
    }
  });

  test('a named function with parallel_tool_calls false: exactly one call of it', { timeout: 120_000 }, async () => {
    const { body } = await create({ tools: TOOLS, tool_choice: { type: 'function', name: 'add' }, parallel_tool_calls: false, max_output_tokens: 600, seed: 4 });
    assert.equal(body.status, 'completed');
    // OpenAI's completed_at: set for a completed response, after its creation.
    assert.ok(typeof body.completed_at === 'number' && body.completed_at >= body.created_at && body.completed_at <= Date.now() / 1000);
    assert.equal(body.completed_at, (await service.client.getTask(body.task.id)).finished_at);
    assert.equal(body.parallel_tool_calls, false);
    assert.deepEqual(body.tool_choice, { type: 'function', name: 'add' });
    const calls = callsOf(body);
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.name, 'add');
    assert.equal(schemaViolation(ADD.parameters, calls[0]!.arguments), null);
  });

  test('tool_choice none, and auto with a model that never writes its call syntax: a message and no call', { timeout: 60_000 }, async () => {
    for (const choice of ['none', 'auto', undefined]) {
      const { body } = await create({ tools: TOOLS, tool_choice: choice, max_output_tokens: 30, seed: 2 });
      assert.equal(body.status, 'incomplete');
      assert.equal(body.completed_at, null, 'completed_at is for completed responses only');
      assert.equal(body.tool_choice, choice ?? 'auto');
      assert.equal(callsOf(body).length, 0);
      assert.equal(body.output.length, 1);
      assert.equal(body.output[0]!.type, 'message');
      assert.equal(body.output[0]!.status, 'incomplete');
      assert.ok(body.output[0]!.content[0]!.text.length > 0);
      const events = await allEvents(service, body.task.id);
      assertItemOrder(events, 'response.incomplete');
      const deltas = events.filter((event) => event.type === 'response.output_text.delta').map((event) => event.delta).join('');
      assert.equal(deltas, body.output[0]!.content[0]!.text);
    }
  });

  test('cut inside a call by max_output_tokens: incomplete, the call incomplete', { timeout: 60_000 }, async () => {
    const whole = await create({ tools: TOOLS, tool_choice: { type: 'function', name: 'get_weather' }, parallel_tool_calls: false, max_output_tokens: 600, seed: 1 });
    assert.equal(whole.body.status, 'completed');
    // The same generation, stopped a few tokens into its arguments.
    const argumentsStart = whole.body.usage!.output_tokens - callsOf(whole.body)[0]!.arguments.length;
    const { body } = await create({ tools: TOOLS, tool_choice: { type: 'function', name: 'get_weather' }, parallel_tool_calls: false, max_output_tokens: argumentsStart, seed: 1 });
    assert.equal(body.status, 'incomplete');
    const calls = callsOf(body);
    assert.ok(calls.length >= 1);
    assert.equal(calls.at(-1)!.status, 'incomplete');
    assertItemOrder(await allEvents(service, body.task.id), 'response.incomplete');
  });

  test('the stream of a create, and its replay through GET ?stream=true, are the log', { timeout: 60_000 }, async () => {
    const streamed = await collectSse(await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', tools: TOOLS, tool_choice: 'required', max_output_tokens: 200, seed: 9, stream: true } }));
    const created = JSON.parse(streamed[0]!.data) as TaskEvent;
    const id = (created.response as ResponseObject).id;
    const replayed = await collectSse(await api(service, `/v1/responses/${id}?stream=true`));
    assert.deepEqual(replayed.map((frame) => frame.data), streamed.map((frame) => frame.data));
    const logged = await allEvents(service, (created.response as ResponseObject).task.id);
    assert.deepEqual(streamed.map((frame) => frame.event), logged.map((event) => event.type));
    assertItemOrder(logged, 'response.completed');
  });

  test('bad tools: 400 naming the field', async () => {
    const unknownChoice = await create({ tools: TOOLS, tool_choice: { type: 'function', name: 'nope' } });
    assert.equal(unknownChoice.status, 400);
    assert.equal(unknownChoice.body.error.param, 'tool_choice');
    const duplicate = await create({ tools: [WEATHER, WEATHER] });
    assert.equal(duplicate.status, 400);
    assert.equal(duplicate.body.error.param, 'tools[1].name');
    const unsupported = await create({ tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: { a: { not: {} } } } }] });
    assert.equal(unsupported.status, 400);
    assert.equal(unsupported.body.error.code, 'unsupported_schema');
    assert.equal(unsupported.body.error.param, 'tools[0].parameters');
    const requiredWithout = await create({ tool_choice: 'required' });
    assert.equal(requiredWithout.status, 400);
    assert.equal(requiredWithout.body.error.param, 'tool_choice');
    for (const parameters of [{ type: 'string' }, {}, { type: 'array' }, { anyOf: [{ type: 'object' }] }]) {
      // As OpenAI: the arguments must be a JSON object, which clients parse as one.
      const notObject = await create({ tools: [WEATHER, { type: 'function', name: 'f', parameters }] });
      assert.equal(notObject.status, 400, JSON.stringify(parameters));
      assert.equal(notObject.body.error.code, 'unsupported_schema');
      assert.equal(notObject.body.error.param, 'tools[1].parameters');
      assert.match(notObject.body.error.message, /'type'.*"object"/);
    }
    const choiceWithoutName = await create({ tools: TOOLS, tool_choice: { type: 'function' } });
    assert.equal(choiceWithoutName.status, 400);
    assert.equal(choiceWithoutName.body.error.param, 'tool_choice.name');
    const choiceOfOtherType = await create({ tools: TOOLS, tool_choice: { type: 'file_search', name: 'add' } });
    assert.equal(choiceOfOtherType.status, 400);
    assert.equal(choiceOfOtherType.body.error.param, 'tool_choice.type');
    const choiceUnknown = await create({ tools: TOOLS, tool_choice: 'sometimes' });
    assert.equal(choiceUnknown.status, 400);
    assert.equal(choiceUnknown.body.error.param, 'tool_choice');
    const notFunction = await create({ tools: [{ type: 'web_search' }] });
    assert.equal(notFunction.status, 400);
    assert.equal(notFunction.body.error.param, 'tools[0].type');
    const untyped = await create({ tools: [{ name: 'f' }] });
    assert.equal(untyped.status, 400);
    assert.equal(untyped.body.error.param, 'tools[0].type');
  });
});

describe('function_call and function_call_output input items (LMSP 6.2)', () => {
  before(async () => {
    service = await startService();
  });
  after(async () => {
    await service.kill();
  });

  const call = { type: 'function_call', call_id: 'call_abc', name: 'add', arguments: '{"a": 1, "b": 2}' };
  const output = (text: string) => ({ type: 'function_call_output', call_id: 'call_abc', output: text });

  test('given directly, they reach the model through the chat template, and input_items shows them', { timeout: 60_000 }, async () => {
    const input = [{ role: 'user', content: 'Add 1 and 2.' }, call, output('3')];
    const short = await create({ input, tools: TOOLS, tool_choice: 'none', max_output_tokens: 8, seed: 1 });
    assert.equal(short.status, 200);
    assert.equal(short.body.status, 'incomplete');
    const long = await create({ input: [input[0], call, output('3'.repeat(101))], tools: TOOLS, tool_choice: 'none', max_output_tokens: 8, seed: 1 });
    assert.ok(long.body.usage!.input_tokens > short.body.usage!.input_tokens, 'the output is in the prompt');
    const listed = await (await api(service, `/v1/responses/${short.body.id}/input_items?order=asc`)).json() as { data: Array<Record<string, unknown>> };
    assert.deepEqual(listed.data.map((item) => item.type), ['message', 'function_call', 'function_call_output']);
    assert.deepEqual({ ...listed.data[1], id: undefined }, { ...call, id: undefined, status: 'completed' });
    assert.deepEqual({ ...listed.data[2], id: undefined }, { ...output('3'), id: undefined, status: 'completed' });
    assert.match(String(listed.data[1]!.id), /^fc_/);
  });

  test('an output given as text parts, as OpenAI allows, reaches the model as their text', { timeout: 60_000 }, async () => {
    const parts = [{ type: 'input_text', text: '{"sum": ' }, { type: 'input_text', text: '3}' }];
    const { status, body } = await create({ input: [{ role: 'user', content: 'Add 1 and 2.' }, call, { ...output(''), output: parts }], max_output_tokens: 2 });
    assert.equal(status, 200, JSON.stringify(body));
    const listed = await (await api(service, `/v1/responses/${body.id}/input_items?order=asc`)).json() as { data: Array<Record<string, unknown>> };
    assert.equal(listed.data[2]!.output, '{"sum": 3}');
    const asString = await create({ input: [{ role: 'user', content: 'Add 1 and 2.' }, call, output('{"sum": 3}')], max_output_tokens: 2 });
    assert.equal(body.usage!.input_tokens, asString.body.usage!.input_tokens);
  });

  test('an output whose call_id matches no call: 400 naming it', async () => {
    const { status, body } = await create({ input: [{ role: 'user', content: 'hi' }, { ...output('3'), call_id: 'call_nope' }], tools: TOOLS });
    assert.equal(status, 400);
    assert.equal(body.error.code, 'invalid_request');
    assert.equal(body.error.param, 'input[1].call_id');
    const malformed = await create({ input: [{ type: 'function_call_output', output: 'x' }] });
    assert.equal(malformed.status, 400);
  });

  test('a malformed call or output item: 400 naming its own field, not a message field', async () => {
    const cases: Array<[object, string]> = [
      [{ type: 'function_call_output', output: 'x' }, 'input[1].call_id'],
      [{ type: 'function_call_output', call_id: 'call_abc' }, 'input[1].output'],
      [{ type: 'function_call_output', call_id: 'call_abc', output: 3 }, 'input[1].output'],
      [{ type: 'function_call_output', call_id: 'call_abc', output: [{ type: 'input_image', image_url: 'x' }] }, 'input[1].output[0].type'],
      [{ type: 'function_call', call_id: 'call_abc', name: 'add' }, 'input[1].arguments'],
      [{ type: 'function_call', name: 'add', arguments: '{}' }, 'input[1].call_id'],
      [{ role: 'robot', content: 'x' }, 'input[1].role'],
      [{ type: 'message', content: 'x' }, 'input[1].role'],
    ];
    const empty = await create({ input: [] });
    assert.equal(empty.status, 400);
    assert.equal(empty.body.error.param, 'input');
    assert.match(empty.body.error.message, /must not be an empty array/);
    for (const [item, param] of cases) {
      const { status, body } = await create({ input: [{ role: 'user', content: 'hi' }, item] });
      assert.equal(status, 400, JSON.stringify(item));
      assert.equal(body.error.code, 'invalid_request');
      assert.equal(body.error.param, param, JSON.stringify(item));
    }
  });

  test('previous_response_id carries the calls: a two-step loop of call, output and answer', { timeout: 120_000 }, async () => {
    const first = await create({ tools: TOOLS, tool_choice: { type: 'function', name: 'add' }, parallel_tool_calls: false, max_output_tokens: 300, seed: 3 });
    assert.equal(first.body.status, 'completed');
    const [made] = callsOf(first.body);
    assert.ok(made);
    const unknown = await create({ previous_response_id: first.body.id, input: [{ ...output('5'), call_id: 'call_other' }], tools: TOOLS });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.error.param, 'input[0].call_id');
    // As OpenAI: continuing a response that made calls, without their outputs, is a 400.
    const unanswered = await create({ previous_response_id: first.body.id, input: 'And now?', tools: TOOLS });
    assert.equal(unanswered.status, 400);
    assert.equal(unanswered.body.error.code, 'invalid_request');
    assert.equal(unanswered.body.error.param, 'input');
    assert.match(unanswered.body.error.message, new RegExp(`No tool output found for function call ${made.call_id}`));
    const second = await create({
      previous_response_id: first.body.id, input: [{ type: 'function_call_output', call_id: made.call_id, output: '{"sum": 5}' }],
      tools: TOOLS, tool_choice: 'none', max_output_tokens: 10, seed: 3,
    });
    assert.equal(second.status, 200);
    assert.equal(second.body.previous_response_id, first.body.id);
    assert.equal(second.body.output[0]!.type, 'message');
    assert.ok(second.body.output[0]!.content[0]!.text.length > 0);
    assert.ok(second.body.usage!.input_tokens > first.body.usage!.input_tokens + made.arguments.length / 4, 'the call and its output are in the prompt');
  });
});

describe('a response with tools cancelled while it writes a call (LMSP 7.4, 6.2)', () => {
  before(async () => {
    service = await startService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' } });
  });
  after(async () => {
    await service.kill();
  });

  test('the partial call stays, incomplete, and the log ends with response.cancelled', { timeout: 60_000 }, async () => {
    const { body: started } = await create({ tools: TOOLS, tool_choice: 'required', max_output_tokens: 1500, seed: 6, background: true });
    await waitFor(async () => (await allEvents(service, started.task.id)).some((event) => event.type === 'response.function_call_arguments.delta'), { what: 'a call argument' });
    const cancel = await api(service, `/v1/responses/${started.id}/cancel`, { method: 'POST' });
    assert.equal(cancel.status, 202);
    const cancelling = (await cancel.json()) as ResponseObject;
    assert.ok(callsOf(cancelling).length >= 1, 'the cancelling response shows the call so far');
    const final = await waitFor(async () => {
      const current = await service.client.getResponse(started.id);
      return current.status === 'cancelled' ? current : null;
    });
    const calls = callsOf(final);
    assert.ok(calls.length >= 1);
    assert.equal(calls.at(-1)!.status, 'incomplete');
    const events = await allEvents(service, started.task.id);
    assert.equal(events.at(-1)!.type, 'response.cancelled');
    assert.deepEqual((events.at(-1)!.response as ResponseObject).output, final.output);
    const last = calls.at(-1)!;
    const deltas = events.filter((event) => event.type === 'response.function_call_arguments.delta' && event.item_id === last.id);
    assert.equal(deltas.map((event) => event.delta).join(''), last.arguments);
  });
});
