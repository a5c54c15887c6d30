/**
 * Structured output and tools on `POST /v1/responses` (LMSP 6.1, 6.2), over raw HTTP against the
 * real service: the shapes of the request and the response, the errors, and the event order.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ResponseObject, TaskEvent } from '../../src/api/types.js';
import { api, startService, type TestService } from '../helpers/service.js';
import { schemaViolation } from '../helpers/schema-validator.js';

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
