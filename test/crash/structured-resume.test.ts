/**
 * A resumed generation follows the same grammar (LMSP 6.1, 6.2, 7.5): a long json_schema
 * generation, and a forced tool call, killed with SIGKILL mid-way and resumed after a restart,
 * end with exactly the output of an uninterrupted run, valid against the schema, and their logs
 * stay gapless and replayable.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { CreateResponseBody, ResponseObject, TaskEvent } from '../../src/api/types.js';
import { api, waitFor, withService, type TestService } from '../helpers/service.js';
import { schemaViolation } from '../helpers/schema-validator.js';
import { collectSse } from '../helpers/sse.js';

const ROWS = {
  type: 'object',
  properties: {
    rows: {
      type: 'array', minItems: 24, maxItems: 24,
      items: {
        type: 'object',
        properties: { word: { type: 'string', minLength: 3, maxLength: 8 }, n: { type: 'integer', minimum: 0, maximum: 999 }, ok: { type: 'boolean' } },
        required: ['word', 'n', 'ok'], additionalProperties: false,
      },
    },
  },
  required: ['rows'], additionalProperties: false,
};

const NOTE = {
  type: 'function' as const, name: 'write_note',
  parameters: { type: 'object', properties: { title: { type: 'string', minLength: 20, maxLength: 30 }, body: { type: 'string', minLength: 60, maxLength: 80 }, n: { type: 'integer', minimum: 0, maximum: 99 } }, required: ['title', 'body', 'n'], additionalProperties: false },
};

function messageText(response: ResponseObject): string {
  const message = (response.output as Array<{ type: string; content?: Array<{ text: string }> }>).find((item) => item.type === 'message');
  return message?.content?.[0]?.text ?? '';
}

async function eventsOf(service: TestService, taskId: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  let after = 0;
  for (;;) {
    const page = await service.client.taskEvents(taskId, after, 1000);
    events.push(...page.data);
    if (!page.has_more) return events;
    after = page.data.at(-1)!.sequence_number;
  }
}

/** Runs `body` in the background, kills the service once `killAt` tokens are committed, restarts it; the finished response. */
async function killAndResume(service: TestService, body: CreateResponseBody, killAt: number): Promise<{ service: TestService; response: ResponseObject; events: TaskEvent[] }> {
  const created = await service.client.createResponse({ ...body, background: true, on_restart: 'resume' });
  await waitFor(async () => ((await service.client.getResponse(created.body.id)).usage?.output_tokens ?? 0) >= killAt, { what: `${killAt} tokens` });
  await service.kill();
  const restarted = await service.restart();
  const response = await waitFor(async () => {
    const current = await restarted.client.getResponse(created.body.id);
    return current.task.status === 'completed' ? current : null;
  }, { timeoutMs: 60_000, what: 'the resumed task to complete' });
  const events = await eventsOf(restarted, created.body.task.id);
  const resumed = events.find((event) => event.type === 'response.resumed');
  assert.ok(resumed, 'the task was resumed, not restarted');
  assert.ok((resumed.output_tokens as number) > 0, 'it continued from committed tokens');
  assert.equal(response.task.attempt, 1);
  events.forEach((event, index) => assert.equal(event.sequence_number, index + 1, 'gapless across the restart'));
  return { service: restarted, response, events };
}

describe('structured output resumed after SIGKILL (LMSP 6.1, 7.5)', () => {
  test('a long json_schema generation: the same valid JSON as an uninterrupted run', { timeout: 240_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '8' } }, async (first) => {
      const body: CreateResponseBody = {
        model: 'lmsp-tiny', input: 'List rows.', max_output_tokens: 2000, seed: 777, temperature: 1,
        text: { format: { type: 'json_schema', name: 'rows', schema: ROWS, strict: true } },
      };
      const reference = (await first.client.createResponse(body)).body;
      assert.equal(reference.status, 'completed');
      const expected = messageText(reference);
      assert.equal(schemaViolation(ROWS, expected), null, expected);
      assert.ok(reference.usage!.output_tokens > 300, `a long output (${reference.usage!.output_tokens} tokens)`);
      let service = first;
      for (const killAt of [40, 250]) {
        const outcome = await killAndResume(service, body, killAt);
        service = outcome.service;
        const text = messageText(outcome.response);
        assert.equal(outcome.response.status, 'completed');
        assert.equal(schemaViolation(ROWS, text), null, text);
        assert.equal(text, expected, `killed at ${killAt} tokens: the same text as an uninterrupted run`);
        const deltas = outcome.events.filter((event) => event.type === 'response.output_text.delta').map((event) => event.delta).join('');
        assert.equal(deltas, text, 'nothing streamed was lost or repeated');
      }
    }));

  test('forced tool calls: the same calls as an uninterrupted run, and the log replays after the restart', { timeout: 240_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '8' } }, async (first) => {
      const body: CreateResponseBody = {
        model: 'lmsp-tiny', input: 'Add numbers.', max_output_tokens: 1500, seed: 4242, tools: [NOTE], tool_choice: 'required',
      };
      const reference = (await first.client.createResponse(body)).body;
      const strip = (response: ResponseObject) => (response.output as unknown as Array<Record<string, unknown>>).map(({ name, arguments: args, status, type }) => ({ name, args, status, type }));
      assert.ok(reference.output.length >= 1);
      const outcome = await killAndResume(first, body, 70);
      assert.equal(outcome.response.status, reference.status);
      assert.deepEqual(strip(outcome.response), strip(reference));
      const replay = await collectSse(await api(outcome.service, `/v1/responses/${outcome.response.id}?stream=true`));
      assert.deepEqual(replay.map((frame) => frame.event), outcome.events.map((event) => event.type));
      const calls = outcome.response.output as unknown as Array<{ id: string; arguments: string }>;
      for (const call of calls) {
        const deltas = outcome.events.filter((event) => event.type === 'response.function_call_arguments.delta' && event.item_id === call.id);
        assert.equal(deltas.map((event) => event.delta).join(''), call.arguments);
        if ((call as { status?: string }).status === 'completed') assert.equal(schemaViolation(NOTE.parameters, call.arguments), null, call.arguments);
      }
    }));
});
