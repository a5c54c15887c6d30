/**
 * The Vercel AI SDK's own OpenAI provider (`@ai-sdk/openai` 3), which speaks the Responses API
 * (LMSP 6), on the real service: a conversation of several turns with `store` at its default,
 * where the provider sends the assistant's earlier turns back as `item_reference` items naming
 * their ids, plain and streamed; and a response whose task failed, which the provider reads only
 * when its `error` has a `type`. The references themselves, through the API: what each resolves
 * to, and what a reference to an item no one may see, or to a running response, gets.
 */
import assert from 'node:assert/strict';
import { appendFileSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createOpenAI } from '@ai-sdk/openai';
import { APICallError, generateText, streamText, type ModelMessage } from 'ai';
import type { InputItemObject, ResponseObject } from '../../src/api/types.js';
import { api, errorOf, pairClient, withService, type TestService } from '../helpers/service.js';

/** The provider, and the bodies it sent (watched only: each request goes to the service unchanged). */
async function provider(service: TestService) {
  const { token } = await pairClient(service, ['responses'], 'ai-sdk-responses');
  const sent: Array<Record<string, unknown>> = [];
  const openai = createOpenAI({
    baseURL: `${service.url}/v1`, apiKey: token,
    fetch: async (url, init) => {
      if (typeof init?.body === 'string') sent.push(JSON.parse(init.body) as Record<string, unknown>);
      return fetch(url, init);
    },
  });
  return { model: openai.responses('lmsp-tiny'), sent, token };
}

async function inputItems(service: TestService, responseId: string): Promise<InputItemObject[]> {
  return ((await (await api(service, `/v1/responses/${responseId}/input_items?order=asc`)).json()) as { data: InputItemObject[] }).data;
}

describe('Vercel AI SDK: the Responses provider', () => {
  test('a conversation of three turns: each earlier answer goes back as an item_reference, and the model sees its text', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      const { model, sent } = await provider(service);
      const messages: ModelMessage[] = [{ role: 'user', content: 'Hi' }];
      const first = await generateText({ model, messages, maxOutputTokens: 8, seed: 1 });
      assert.ok(first.text.length > 0);
      messages.push(...first.response.messages, { role: 'user', content: 'Again' });
      const second = await generateText({ model, messages, maxOutputTokens: 8, seed: 2 });
      const firstId = (first.response.body as ResponseObject).output[0]!.id;
      assert.deepEqual((sent[1]!.input as unknown[])[1], { type: 'item_reference', id: firstId }, 'the provider sent the first answer by reference');
      // The service put the referenced message in its place: the assistant's text, with its id.
      const seen = await inputItems(service, second.response.id);
      assert.deepEqual(seen.map((item) => [item.type, 'role' in item ? item.role : null, item.id]),
        [['message', 'user', seen[0]!.id], ['message', 'assistant', firstId], ['message', 'user', seen[2]!.id]]);
      assert.equal((seen[1] as { content: Array<{ text: string }> }).content[0]!.text, first.text);

      // Streamed, with both earlier answers referenced.
      messages.push(...second.response.messages, { role: 'user', content: 'Once more' });
      const third = streamText({ model, messages, maxOutputTokens: 8, seed: 3 });
      const text = await third.text;
      assert.ok(text.length > 0);
      const references = (sent[2]!.input as Array<{ type?: string }>).filter((item) => item.type === 'item_reference');
      assert.equal(references.length, 2);
      const thirdId = (await third.response).id;
      const roles = (await inputItems(service, thirdId)).map((item) => ('role' in item ? item.role : item.type));
      assert.deepEqual(roles, ['user', 'assistant', 'user', 'assistant', 'user']);
    }));

  test('a response whose task failed: the provider throws the service\'s message, not a JSON validation error', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      // A registered file changed since: its task fails with model_digest_mismatch.
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'changed.gguf'));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'changed.gguf', id: 'changed' } })).status, 201);
      appendFileSync(join(service.dataDir, 'models', 'changed.gguf'), 'xx');
      const { token } = await pairClient(service, ['responses'], 'ai-sdk-failed');
      const model = createOpenAI({ baseURL: `${service.url}/v1`, apiKey: token }).responses('changed');
      const failure = await generateText({ model, prompt: 'Hi', maxOutputTokens: 4, maxRetries: 0 }).then(() => null, (error: unknown) => error);
      assert.ok(APICallError.isInstance(failure), String(failure));
      assert.match(failure.message, /^the file of model 'changed' changed: its digest is now sha256:/);
      // The error as the response object carries it: LMSP 6's code and message, and a type.
      // The provider keeps the body it parsed (typed as text).
      const raw = failure.responseBody as unknown;
      const body = (typeof raw === 'string' ? JSON.parse(raw) : raw) as ResponseObject;
      assert.equal(body.status, 'failed');
      assert.deepEqual(Object.keys(body.error!).sort(), ['code', 'message', 'type']);
      assert.equal(body.error!.code, 'model_digest_mismatch');
      assert.equal(body.error!.type, 'conflict_error', 'the type of the HTTP error of that code');
    }));

  test('item_reference through the API: a message or a function call of a stored response; none of another client or of a running response', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
      const create = (body: object, token = service.token) => api({ url: service.url, token }, '/v1/responses',
        { method: 'POST', json: { model: 'lmsp-tiny', max_output_tokens: 4, ...body } });
      const answered = (await (await create({ input: 'Hi' })).json()) as ResponseObject;
      const message = answered.output[0]!;
      assert.equal(message.id, `msg_${answered.id.slice('resp_'.length)}`, 'a message\'s id names its response');

      // A forced call, referenced, then answered.
      const add = { type: 'function', name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'], additionalProperties: false } };
      const called = (await (await create({ input: 'Add', tools: [add], tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 64 })).json()) as ResponseObject;
      const call = (called.output as unknown as Array<{ type: string; id: string; call_id: string; name: string; arguments: string }>).find((item) => item.type === 'function_call')!;
      const continued = await create({ input: [{ role: 'user', content: 'Add' }, { type: 'item_reference', id: call.id }, { type: 'function_call_output', call_id: call.call_id, output: '5' }], tools: [add] });
      assert.equal(continued.status, 200, JSON.stringify(await continued.clone().json()));
      const items = await inputItems(service, ((await continued.json()) as ResponseObject).id);
      assert.deepEqual(items[1], { type: 'function_call', id: call.id, call_id: call.call_id, name: 'add', arguments: call.arguments, status: 'completed' });

      // A message keeps its status (cut by max_output_tokens: incomplete); as the openai package
      // types a reference, it may have neither type nor role.
      const referenced = (await (await create({ input: [{ id: message.id }, { role: 'user', content: 'more' }] })).json()) as ResponseObject;
      const seen = await inputItems(service, referenced.id);
      assert.deepEqual(seen[0], { type: 'message', id: message.id, role: 'assistant', status: 'incomplete', content: [{ type: 'output_text', text: message.content[0]!.text, annotations: [], logprobs: [] }] });

      // Continued with previous_response_id, an item that conversation holds is not given twice (as OpenAI).
      for (const input of [[{ type: 'item_reference', id: message.id }, { role: 'user', content: 'x' }], [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'y', id: message.id }]]) {
        const twice = await create({ previous_response_id: referenced.id, input });
        assert.equal(twice.status, 400);
        const error = await errorOf(twice);
        assert.equal(error.param, input[0]!.id === message.id ? 'input[0].id' : 'input[1].id');
        assert.match(error.message, new RegExp(`^Duplicate item found with id ${message.id}\\.`));
      }

      // No message in the output, no message to refer to: a task cancelled while queued, or one whose output is calls only.
      const queued = (await (await create({ input: 'wait', background: true, max_output_tokens: 500 })).json()) as ResponseObject;
      const behind = (await (await create({ input: 'behind', background: true })).json()) as ResponseObject;
      assert.equal((await api(service, `/v1/responses/${behind.id}/cancel`, { method: 'POST' })).status, 200);
      assert.equal((await api(service, `/v1/responses/${queued.id}/cancel`, { method: 'POST' })).status, 202);
      for (const id of [`msg_${behind.id.slice('resp_'.length)}`, `msg_${called.id.slice('resp_'.length)}`]) {
        assert.equal(called.output.some((item) => item.id === id), false);
        const refused = await create({ input: [{ type: 'item_reference', id }] });
        assert.equal(refused.status, 404, id);
        assert.equal((await errorOf(refused)).message, `Item with id '${id}' not found.`, 'no word of store: false, which these were not');
      }

      // Not found: unknown, or another client's (a client without admin sees only its own).
      const other = await pairClient(service, ['responses'], 'other');
      for (const [token, id] of [[service.token, 'msg_unknown000000000000000000'], [other.token, message.id], [other.token, call.id]] as const) {
        const refused = await create({ input: [{ role: 'user', content: 'x' }, { type: 'item_reference', id }] }, token);
        assert.equal(refused.status, 404, id);
        const error = await errorOf(refused);
        assert.deepEqual([error.code, error.param], ['not_found', 'input[1].id']);
        assert.match(error.message, new RegExp(`^Item with id '${id}' not found`));
      }
      // A running response's output is not final yet.
      const running = (await (await create({ input: 'long', background: true, max_output_tokens: 500 })).json()) as ResponseObject;
      const early = await create({ input: [{ type: 'item_reference', id: `msg_${running.id.slice('resp_'.length)}` }] });
      assert.equal(early.status, 409);
      const earlyError = await errorOf(early);
      assert.deepEqual([earlyError.code, earlyError.param], ['response_not_finished', 'input[0].id']);
      // Without its id, a reference is named by what it lacks.
      const bare = await create({ input: [{ type: 'item_reference' }] });
      assert.equal(bare.status, 400);
      assert.equal((await errorOf(bare)).param, 'input[0].id');
    }));
});
