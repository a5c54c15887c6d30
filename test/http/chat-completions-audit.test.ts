/**
 * Chat Completions and Embeddings as a client author sees them from outside (LMSP 2, 9, 13, 14),
 * against the real service: the details the OpenAI API answers and real clients rely on.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ChatCompletionObject } from '../../src/api/chat-completions.js';
import { api, withService, type TestService } from '../helpers/service.js';

const MESSAGES = [{ role: 'user', content: 'Hello' }];

async function json<T>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

function chat(service: Pick<TestService, 'url' | 'token'>, body: object): Promise<Response> {
  return api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'lmsp-tiny', messages: MESSAGES, ...body } });
}

async function expectError(response: Response, status: number, code: string, param: string | null): Promise<string> {
  const body = await json<{ error: { code: string; param: string | null; message: string } }>(response);
  assert.equal(response.status, status, JSON.stringify(body));
  assert.equal(body.error.code, code, body.error.message);
  assert.equal(body.error.param, param, body.error.message);
  return body.error.message;
}

describe('chat completions and embeddings, from a client author\'s side', () => {
  test('a 64-bit seed, as OpenAI takes and Python clients draw, is taken on both APIs and samples the same text each time; beyond 64 bits it is 400', { timeout: 60_000 }, () => withService({}, async (service) => {
    for (const seed of ['9223372036854775807', '-9223372036854775808', '4611686018427387904']) {
      const body = `{"model": "lmsp-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 12, "seed": ${seed}}`;
      const texts = [];
      for (let run = 0; run < 2; run++) {
        const answer = await api(service, '/v1/chat/completions', { method: 'POST', body, headers: { 'content-type': 'application/json' } });
        assert.equal(answer.status, 200, `${seed}: ${await answer.clone().text()}`);
        texts.push((await json<ChatCompletionObject>(answer)).choices[0]!.message.content);
      }
      assert.equal(texts[0], texts[1], `seed ${seed} samples the same text`);
      const response = await api(service, '/v1/responses', { method: 'POST', body: `{"model": "lmsp-tiny", "input": "hi", "max_output_tokens": 3, "seed": ${seed}}`, headers: { 'content-type': 'application/json' } });
      assert.equal(response.status, 200, seed);
      assert.equal((await json<{ seed: number }>(response)).seed, Number(seed));
    }
    await expectError(await chat(service, { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'hi' }], seed: 2 ** 64 }), 400, 'invalid_request', 'seed');
  }));

  test('under a grammar, a logit_bias of -100 on the only token it allows does not let the generation out of it', { timeout: 60_000 }, () => withService({}, async (service) => {
    // lmsp-tiny's tokens are its bytes, from id 3: 126 is "{", which every object starts with.
    const open = String('{'.charCodeAt(0) + 3);
    const schema = { type: 'object', properties: { a: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['a'], additionalProperties: false };
    for (const seed of [1, 2]) {
      const answer = await chat(service, {
        model: 'lmsp-tiny', seed, max_tokens: 80, logit_bias: { [open]: -100 },
        response_format: { type: 'json_schema', json_schema: { name: 'o', schema } },
      });
      const completion = await json<ChatCompletionObject>(answer);
      assert.equal(completion.choices[0]!.finish_reason, 'stop', completion.choices[0]!.message.content ?? '');
      const value = JSON.parse(completion.choices[0]!.message.content!) as { a: number };
      assert.ok(Number.isInteger(value.a) && value.a >= 0 && value.a <= 9, JSON.stringify(value));
    }
    // Without a grammar, -100 still bans the token: no "{" in a long text that would have some.
    const free = await json<ChatCompletionObject>(await chat(service, { model: 'lmsp-tiny', seed: 3, max_tokens: 300, logit_bias: { [open]: -100 }, messages: [{ role: 'user', content: '{{{{' }] }));
    assert.ok(!free.choices[0]!.message.content!.includes('{'));
  }));

  test('a list cursor that names no completion is 400 naming after, as the tasks list answers', { timeout: 60_000 }, () => withService({}, async (service) => {
    const created = await json<ChatCompletionObject>(await chat(service, { max_completion_tokens: 2, store: true }));
    await expectError(await api(service, '/v1/chat/completions?after=chatcmpl-unknown'), 400, 'invalid_request', 'after');
    await expectError(await api(service, '/v1/tasks?after=task_unknown'), 400, 'invalid_request', 'after');
    await expectError(await api(service, `/v1/chat/completions/${created.id}/messages?after=unknown`), 400, 'invalid_request', 'after');
    // An empty cursor names nothing either: it is not taken as "no cursor" (the clients list answered so already).
    for (const path of ['/v1/chat/completions', '/v1/tasks', `/v1/chat/completions/${created.id}/messages`, '/v1/clients']) {
      await expectError(await api(service, `${path}?after=`), 400, 'invalid_request', 'after');
    }
    const response = await json<{ id: string }>(await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', max_output_tokens: 1 } }));
    await expectError(await api(service, `/v1/responses/${response.id}/input_items?after=`), 400, 'invalid_request', 'after');
    const page = await json<{ data: ChatCompletionObject[] }>(await api(service, `/v1/chat/completions?after=${created.id}`));
    assert.deepEqual(page.data, [], 'a known cursor still pages');
  }));

  test('a text part without its text is 400 naming the missing field, not its type', { timeout: 60_000 }, () => withService({}, async (service) => {
    await expectError(await chat(service, { messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text' }] }] }),
      400, 'invalid_request', 'messages[0].content[1].text');
    await expectError(await chat(service, { messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: [{ type: 'refusal' }] }] }),
      400, 'invalid_request', 'messages[1].content[0].refusal');
    await expectError(await chat(service, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }),
      400, 'invalid_request', 'messages[0].content[0].type');
  }));

  test('a tool_choice object is 400 naming the field at fault: function for the Responses shape, type for another kind', { timeout: 60_000 }, () => withService({}, async (service) => {
    const tools = [{ type: 'function', function: { name: 'add', parameters: { type: 'object', properties: {} } } }];
    // The Responses API's {type, name} lacks the `function` that Chat Completions names the function in.
    await expectError(await chat(service, { tools, tool_choice: { type: 'function', name: 'add' } }), 400, 'invalid_request', 'tool_choice.function');
    await expectError(await chat(service, { tools, tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [] } } }),
      400, 'invalid_request', 'tool_choice.type');
    await expectError(await chat(service, { tools, tool_choice: { type: 'function', function: {} } }), 400, 'invalid_request', 'tool_choice.function.name');
    await expectError(await chat(service, { tools, tool_choice: 'sometimes' }), 400, 'invalid_request', 'tool_choice');
    const forced = await chat(service, { tools, tool_choice: { type: 'function', function: { name: 'add' } }, max_completion_tokens: 60, parallel_tool_calls: false });
    const body = await json<ChatCompletionObject>(forced);
    assert.equal(forced.status, 200, JSON.stringify(body));
    assert.equal(body.choices[0]!.message.tool_calls?.[0]?.function.name, 'add');
  }));

  test('tool calls are answered by the tool messages right after them, each of them, as OpenAI requires', { timeout: 60_000 }, () => withService({}, async (service) => {
    const call = (id: string) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } });
    const user = { role: 'user', content: 'Hi' };
    const calls = { role: 'assistant', content: null, tool_calls: [call('c1'), call('c2')] };
    const result = (id: string) => ({ role: 'tool', tool_call_id: id, content: 'r' });
    const unanswered = await expectError(await chat(service, { messages: [user, calls, result('c1'), user] }), 400, 'invalid_request', 'messages[3].role');
    assert.match(unanswered, /did not have response messages: c2\.$/);
    await expectError(await chat(service, { messages: [user, calls, user] }), 400, 'invalid_request', 'messages[2].role');
    await expectError(await chat(service, { messages: [user, calls] }), 400, 'invalid_request', 'messages');
    // A result given after the conversation moved on answers nothing the model is waiting for.
    await expectError(await chat(service, { messages: [user, calls, result('c1'), result('c2'), user, result('c1')] }),
      400, 'invalid_request', 'messages[5].tool_call_id');
    const answered = await chat(service, { messages: [user, calls, result('c2'), result('c1'), user], max_completion_tokens: 2 });
    assert.equal(answered.status, 200, await answered.text());
  }));

  test('null in an optional nested field counts as absent, as at the top level and in the Responses API', { timeout: 60_000 }, () => withService({}, async (service) => {
    const user = { role: 'user', content: 'Hi', name: null };
    const bodies = [
      { tools: [{ type: 'function', function: { name: 'a', description: null, parameters: null, strict: null } }] },
      { response_format: { type: 'json_schema', json_schema: { name: 'ok', description: null, schema: { type: 'boolean' }, strict: null } } },
      // An assistant message echoed back as a client received it: no calls, said as null.
      { messages: [user, { role: 'assistant', content: 'x', tool_calls: null, name: null }, { role: 'system', content: 'Be brief.', name: null }, user] },
    ];
    for (const body of bodies) {
      const response = await chat(service, { ...body, max_completion_tokens: 2 });
      assert.equal(response.status, 200, `${JSON.stringify(body)}: ${await response.text()}`);
    }
    // A tool message still needs the call it answers.
    const calls = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] };
    await expectError(await chat(service, { messages: [user, calls, { role: 'tool', tool_call_id: null, content: 'r' }] }),
      400, 'invalid_request', 'messages[2].tool_call_id');
  }));

  test('unsupported_schema names the keyword and where it is in the words of the Responses API, for formats and tools alike', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const schema = { type: 'object', properties: { a: { type: 'string', not: { const: 'x' } } } };
      const responses = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'hi', text: { format: { type: 'json_schema', name: 'a', schema } } } });
      const expected = await expectError(responses, 400, 'unsupported_schema', 'text.format.schema');
      assert.match(expected, /^Unsupported JSON Schema keyword 'not' at \/properties\/a\/not: /);
      const format = await chat(service, { response_format: { type: 'json_schema', json_schema: { name: 'a', schema } } });
      assert.equal(await expectError(format, 400, 'unsupported_schema', 'response_format.json_schema.schema'), expected);
      const tool = await chat(service, { tools: [{ type: 'function', function: { name: 'f', parameters: schema } }] });
      assert.equal(await expectError(tool, 400, 'unsupported_schema', 'tools[0].function.parameters'), expected);
    }));

  test('a metadata filter is never dropped: __proto__ and the empty key match like any other, a repeated or mistyped filter is 400', { timeout: 60_000 }, () => withService({}, async (service) => {
    const tagged = await json<ChatCompletionObject>(await chat(service, { max_completion_tokens: 2, store: true, metadata: JSON.parse('{"__proto__": "x", "n": "1", "": "e"}') as object }));
    await chat(service, { max_completion_tokens: 2, store: true, metadata: { n: '2' } });
    const ids = async (query: string) => (await json<{ data: ChatCompletionObject[] }>(await api(service, `/v1/chat/completions${query}`))).data.map((item) => item.id);
    assert.equal((await ids('')).length, 2);
    assert.deepEqual(await ids('?metadata[__proto__]=x'), [tagged.id]);
    assert.deepEqual(await ids('?metadata[__proto__]=y'), []);
    assert.deepEqual(await ids('?metadata[]=e'), [tagged.id]);
    assert.deepEqual(await ids('?metadata%5B%5D=zzz'), []);
    await expectError(await api(service, '/v1/chat/completions?metadata[n]=1&metadata[n]=2'), 400, 'invalid_request', 'metadata[n]');
    for (const mistyped of ['metadata', 'metadata[n', 'metadatan]']) {
      assert.match(await expectError(await api(service, `/v1/chat/completions?${encodeURIComponent(mistyped)}=1`), 400, 'invalid_request', mistyped), /write metadata\[key\]=value/);
    }
  }));

  test('without max_completion_tokens only the messages must fit: the default shrinks to the room they leave', { timeout: 120_000 }, () => withService({}, async (service) => {
    const model = await json<{ context_length: number }>(await api(service, '/v1/models/lmsp-tiny'));
    // Byte-level vocabulary: about a token a byte, so these messages leave less than the default 1024.
    const messages = [{ role: 'user', content: 'ab '.repeat(Math.floor((model.context_length - 900) / 3)) }];
    const asked = await chat(service, { messages, max_completion_tokens: 1024 });
    assert.match(await expectError(asked, 400, 'context_length_exceeded', 'messages'), /max_completion_tokens \(1024\)/);
    // The message names the field the client sent.
    const older = await chat(service, { messages, max_tokens: 1024 });
    assert.match(await expectError(older, 400, 'context_length_exceeded', 'messages'), /and max_tokens \(1024\)/);
    const answer = await chat(service, { messages, stop: ['a', 'e', 'o', 'b'], seed: 1 });
    const body = await json<ChatCompletionObject>(answer);
    assert.equal(answer.status, 200, JSON.stringify(body));
    assert.ok(body.usage.prompt_tokens > model.context_length - 1024, `prompt_tokens ${body.usage.prompt_tokens}`);
    assert.ok(body.usage.prompt_tokens + body.usage.completion_tokens <= model.context_length);
    const tooLong = [{ role: 'user', content: 'ab '.repeat(Math.ceil(model.context_length / 3)) }];
    const refused = await expectError(await chat(service, { messages: tooLong }), 400, 'context_length_exceeded', 'messages');
    // Neither limit was sent, so the message does not blame one.
    assert.doesNotMatch(refused, /max_tokens|max_completion_tokens/);
    assert.match(refused, /^The messages \(\d+ tokens\) leave no room for a completion in the context length of 'lmsp-tiny' \(\d+ tokens\)\.$/);
  }));
});
