/**
 * The official `openai` package (6.30.1), unchanged but for baseURL and apiKey, against the real
 * service: every call a client of the Responses API makes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI, {
  AuthenticationError, BadRequestError, ConflictError, NotFoundError, PermissionDeniedError, UnprocessableEntityError,
} from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { pairClient, waitFor, withService, type TestService } from '../helpers/service.js';

/** The text of a response's message (the stream helper's final response has no output_text). */
function messageText(response: { output: unknown[] }): string {
  return (response.output[0] as { content: Array<{ text: string }> }).content[0]!.text;
}

async function openai(service: TestService, scopes = ['responses', 'models:read']): Promise<OpenAI> {
  const { token } = await pairClient(service, scopes, 'openai-sdk');
  return new OpenAI({ baseURL: `${service.url}/v1`, apiKey: token });
}

describe('the official openai package works unchanged', () => {
  test('models.list', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    const models = [];
    for await (const model of client.models.list()) models.push(model);
    assert.deepEqual(models.map((model) => model.id), ['lmsp-tiny']);
    assert.equal(models[0]!.object, 'model');
    assert.equal(models[0]!.owned_by, 'lmsp');
    const one = await client.models.retrieve('lmsp-tiny');
    assert.equal(one.id, 'lmsp-tiny');
  }));

  test('responses.create, plain: the finished response, with output_text', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    const response = await client.responses.create({ model: 'lmsp-tiny', input: 'Hello', max_output_tokens: 16, instructions: 'Be brief.', metadata: { run: 'sdk' } });
    assert.equal(response.object, 'response');
    assert.equal(response.status, 'incomplete');
    assert.equal(response.incomplete_details?.reason, 'max_output_tokens');
    assert.ok(response.output_text.length > 0);
    assert.equal(response.output_text, (response.output[0] as { content: Array<{ text: string }> }).content[0]!.text);
    assert.equal(response.usage?.output_tokens, 16);
    assert.deepEqual(response.metadata, { run: 'sdk' });
    const items = [];
    for await (const item of client.responses.inputItems.list(response.id)) items.push(item);
    assert.equal(items.length, 1);
  }));

  test('responses.create with background: true (a 202 here), then retrieve until done', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    const started = await client.responses.create({ model: 'lmsp-tiny', input: 'Hello', background: true, max_output_tokens: 30 });
    assert.equal(started.status, 'queued');
    assert.equal(started.background, true);
    const done = await waitFor(async () => {
      const current = await client.responses.retrieve(started.id);
      return current.status === 'incomplete' ? current : null;
    });
    assert.equal(done.usage?.output_tokens, 30);
    assert.ok(done.output_text.length > 0);
  }));

  test('responses.create with stream: true yields typed events with sequence numbers', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    const stream = await client.responses.create({ model: 'lmsp-tiny', input: 'Hello', stream: true, max_output_tokens: 20 });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    assert.deepEqual(events.map((event) => event.sequence_number), events.map((_, index) => index + 1));
    assert.equal(events[0]!.type, 'response.created');
    assert.equal(events.at(-1)!.type, 'response.incomplete');
    const text = events.filter((event) => event.type === 'response.output_text.delta').map((event) => (event as { delta: string }).delta).join('');
    const done = events.find((event) => event.type === 'response.output_text.done') as { text: string };
    assert.equal(text, done.text);
  }));

  test('the responses.stream helper builds the response and finalResponse() resolves', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    let deltas = '';
    const stream = client.responses.stream({ model: 'lmsp-tiny', input: 'Hello', max_output_tokens: 25, seed: 3 })
      .on('response.output_text.delta', (event) => {
        deltas += event.delta;
        assert.equal(typeof event.snapshot, 'string', 'the helper accumulated the text before accepting the delta');
      });
    const final = await stream.finalResponse();
    assert.equal(messageText(final), deltas);
    assert.ok(deltas.length > 0);
  }));

  test('the helper also follows LMSP events (loading, cancelling) without choking', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10', LMSP_DEBUG_LOAD_DELAY_MS: '200' } }, async (service) => {
      const client = await openai(service);
      const seen: string[] = [];
      let responseId = '';
      const stream = client.responses.stream({ model: 'lmsp-tiny', input: 'Hello', max_output_tokens: 400, background: true });
      stream.on('event', (event) => {
        seen.push(event.type);
        if (event.type === 'response.created') responseId = event.response.id;
        if (event.type === 'response.output_text.delta' && seen.filter((type) => type === 'response.output_text.delta').length === 5) {
          void client.responses.cancel(responseId);
        }
      });
      const final = await stream.finalResponse();
      assert.ok(seen.includes('response.loading'));
      assert.ok(seen.includes('response.cancelling'));
      assert.equal(seen.at(-1), 'response.cancelled');
      assert.ok(messageText(final).length > 0);
    }));

  test('retrieve(id, {stream: true, starting_after}) replays from there', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    const created = await client.responses.create({ model: 'lmsp-tiny', input: 'Hello', max_output_tokens: 10 });
    const replay = await client.responses.retrieve(created.id, { stream: true, starting_after: 4 });
    const numbers: number[] = [];
    for await (const event of replay) numbers.push(event.sequence_number);
    assert.equal(numbers[0], 5);
    assert.deepEqual(numbers, numbers.map((_, index) => index + 5));
    const helper = client.responses.stream({ response_id: created.id, starting_after: 2 });
    const helperNumbers: number[] = [];
    helper.on('event', (event) => helperNumbers.push(event.sequence_number));
    const final = await helper.finalResponse();
    assert.equal(helperNumbers[0], 3);
    assert.equal(messageText(final), created.output_text);
  }));

  test('responses.cancel and responses.delete', { timeout: 60_000 }, () => withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' } }, async (service) => {
    const client = await openai(service);
    const started = await client.responses.create({ model: 'lmsp-tiny', input: 'Hello', background: true, max_output_tokens: 3000 });
    await waitFor(async () => (await client.responses.retrieve(started.id)).status === 'in_progress');
    const cancelled = await client.responses.cancel(started.id);
    assert.equal(cancelled.id, started.id);
    await waitFor(async () => (await client.responses.retrieve(started.id)).status === 'cancelled');
    await client.responses.delete(started.id);
    await assert.rejects(client.responses.retrieve(started.id), NotFoundError);
  }));

  test('errors surface as the SDK typed errors with the right code', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await openai(service);
    await assert.rejects(client.responses.create({ model: 'no-such-model', input: 'x' }),
      (error: unknown) => error instanceof NotFoundError && error.code === 'model_not_found' && error.param === 'model');
    await assert.rejects(client.responses.create({ model: 'lmsp-tiny', input: 'x', temperature: 9 }),
      (error: unknown) => error instanceof BadRequestError && error.code === 'invalid_request' && error.param === 'temperature');
    const stranger = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'lmsp_' + 'x'.repeat(43), maxRetries: 0 });
    await assert.rejects(stranger.models.list(), (error: unknown) => error instanceof AuthenticationError && error.code === 'invalid_token');
    const modelsOnly = await openai(service, ['models:read']);
    await assert.rejects(modelsOnly.responses.create({ model: 'lmsp-tiny', input: 'x' }),
      (error: unknown) => error instanceof PermissionDeniedError && error.code === 'insufficient_scope');
    // A 409 that no retry can fix carries x-should-retry: false, so the SDK does not retry it.
    const finished = await client.responses.create({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
    const started = Date.now();
    await assert.rejects(client.responses.cancel(finished.id), (error: unknown) => error instanceof ConflictError && error.code === 'task_not_cancellable');
    assert.ok(Date.now() - started < 400, 'no retry with backoff happened');
    const key = { headers: { 'Idempotency-Key': 'sdk-key' } };
    await client.responses.create({ model: 'lmsp-tiny', input: 'one', background: true, max_output_tokens: 2 }, key);
    await assert.rejects(client.responses.create({ model: 'lmsp-tiny', input: 'two', background: true, max_output_tokens: 2 }, key),
      (error: unknown) => error instanceof UnprocessableEntityError && error.code === 'idempotency_key_reused');
  }));
});
