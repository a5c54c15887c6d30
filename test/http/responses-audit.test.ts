/**
 * `POST /v1/responses` as a client author sees it from outside (LMSP 2, 6, 6.2, 9), against the
 * real service: the details the OpenAI Responses API answers and real clients rely on.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ResponseObject } from '../../src/api/types.js';
import { api, startService, type TestService } from '../helpers/service.js';

interface ErrorAnswer {
  error: { type: string; code: string; param: string | null; message: string };
}

const ADD = { type: 'function', name: 'add', parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } } };

let service: TestService;

async function create(body: object): Promise<{ status: number; body: ResponseObject & ErrorAnswer }> {
  const response = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'hi', max_output_tokens: 2, ...body } });
  return { status: response.status, body: (await response.json()) as ResponseObject & ErrorAnswer };
}

async function expectError(body: object, param: string, message?: RegExp): Promise<void> {
  const answer = await create(body);
  assert.equal(answer.status, 400, JSON.stringify(answer.body));
  assert.equal(answer.body.error.type, 'invalid_request_error');
  assert.equal(answer.body.error.code, 'invalid_request', answer.body.error.message);
  assert.equal(answer.body.error.param, param, answer.body.error.message);
  if (message) assert.match(answer.body.error.message, message);
}

describe('responses, from a client author\'s side', () => {
  before(async () => {
    service = await startService();
  });
  after(async () => {
    await service.kill();
  });

  test('a content part, an input item or a tool_choice of a type LMSP does not serve is 400 naming its type', async () => {
    // Not the text, role or name that a part, message or function choice would need.
    await expectError({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/a.png' }] }] }, 'input[0].content[0].type');
    await expectError({ input: [{ role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'input_file', file_id: 'f' }] }] }, 'input[0].content[1].type');
    await expectError({ input: [{ role: 'user', content: 'hi' }, { type: 'reasoning', id: 'rs_1', summary: [] }] }, 'input[1].type');
    await expectError({ tools: [ADD], tool_choice: { type: 'web_search_preview' } }, 'tool_choice.type');
    // What each of them needs is still named when it is missing.
    await expectError({ input: [{ role: 'user', content: [{ type: 'input_text' }] }] }, 'input[0].content[0].text');
    await expectError({ input: [{ type: 'message', content: 'x' }] }, 'input[0].role');
    await expectError({ tools: [ADD], tool_choice: { type: 'function' } }, 'tool_choice.name');
    const typed = await create({ input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }], tools: [ADD], tool_choice: { type: 'function', name: 'add' } });
    assert.equal(typed.status, 200, JSON.stringify(typed.body));
  });

  test('a function_call given as input needs its function_call_output, as OpenAI answers: 400 naming input', async () => {
    const call = { type: 'function_call', call_id: 'call_1', name: 'add', arguments: '{"a": 1, "b": 2}' };
    const output = { type: 'function_call_output', call_id: 'call_1', output: '3' };
    await expectError({ input: [{ role: 'user', content: 'Add 1 and 2.' }, call], tools: [ADD] }, 'input', /^No tool output found for function call call_1\.$/);
    await expectError({ input: [{ role: 'user', content: 'Add.' }, call, output, { ...call, call_id: 'call_2' }, { role: 'user', content: 'And?' }] }, 'input',
      /call_2/);
    const answered = await create({ input: [{ role: 'user', content: 'Add 1 and 2.' }, call, output], tools: [ADD], tool_choice: 'none' });
    assert.equal(answered.status, 200, JSON.stringify(answered.body));
  });

  test('usage has the token details of OpenAI\'s, which its clients read without checking for them', async () => {
    const answer = await create({ max_output_tokens: 3 });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const usage = answer.body.usage!;
    assert.deepEqual(usage, {
      input_tokens: usage.input_tokens, input_tokens_details: { cached_tokens: 0 },
      output_tokens: 3, output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.input_tokens + 3,
    });
    const events = (await (await api(service, `/v1/tasks/${answer.body.task.id}/events`)).json()) as { data: Array<{ type: string; response?: ResponseObject }> };
    assert.deepEqual(events.data.at(-1)!.response!.usage, usage, 'the terminal event carries the same usage');
  });
});
