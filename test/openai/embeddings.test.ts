/**
 * The official `openai` package's `embeddings.create` against the real service (LMSP 14): with
 * `encoding_format: 'float'`, and with the SDK's default, which asks for base64 and decodes it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI, { BadRequestError, NotFoundError } from 'openai';
import type { EmbeddingList } from '../../src/api/embeddings.js';
import { api, pairClient, withService, type TestService } from '../helpers/service.js';

/** The float vectors straight from the HTTP API, to compare each client with. */
async function floatsOf(service: TestService, input: string | string[], dimensions?: number): Promise<number[][]> {
  const response = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'lmsp-tiny', input, encoding_format: 'float', dimensions } });
  assert.equal(response.status, 200);
  return ((await response.json()) as EmbeddingList).data.map((item) => item.embedding as number[]);
}

describe('openai embeddings.create', () => {
  test('float and the default base64 decode to the same vectors; errors are the SDK\'s classes with code and param', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const { token } = await pairClient(service, ['responses'], 'openai-sdk');
      const sent: Array<Record<string, unknown>> = [];
      const client = new OpenAI({
        baseURL: `${service.url}/v1`,
        apiKey: token,
        // Only watches what the SDK sends; the request goes to the service unchanged.
        fetch: async (url, init) => {
          if (typeof init?.body === 'string') sent.push(JSON.parse(init.body) as Record<string, unknown>);
          return fetch(url, init);
        },
      });
      const inputs = ['The cat sat.', 'A dog ran far away.'];
      const expected = await floatsOf(service, inputs);

      const floats = await client.embeddings.create({ model: 'lmsp-tiny', input: inputs, encoding_format: 'float' });
      assert.equal(sent.at(-1)!.encoding_format, 'float');
      assert.equal(floats.object, 'list');
      assert.equal(floats.model, 'lmsp-tiny');
      assert.deepEqual(floats.data.map((item) => [item.object, item.index]), [['embedding', 0], ['embedding', 1]]);
      assert.deepEqual(floats.data.map((item) => item.embedding), expected);
      assert.ok(floats.usage.prompt_tokens > 0);
      assert.equal(floats.usage.total_tokens, floats.usage.prompt_tokens);

      const decoded = await client.embeddings.create({ model: 'lmsp-tiny', input: inputs });
      assert.equal(sent.at(-1)!.encoding_format, 'base64', 'the SDK asks for base64 by default');
      assert.deepEqual(decoded.data.map((item) => item.embedding), expected, 'and decodes it to the same numbers');
      assert.deepEqual(decoded.usage, floats.usage);

      const short = await client.embeddings.create({ model: 'lmsp-tiny', input: 'The cat sat.', dimensions: 12 });
      assert.deepEqual(short.data[0]!.embedding, (await floatsOf(service, 'The cat sat.', 12))[0]);
      const explicitBase64 = await client.embeddings.create({ model: 'lmsp-tiny', input: 'The cat sat.', encoding_format: 'base64' });
      assert.equal(Buffer.from(explicitBase64.data[0]!.embedding as unknown as string, 'base64').length, 64 * 4,
        'asked for explicitly, base64 is left to the caller');

      await assert.rejects(client.embeddings.create({ model: 'nope', input: 'a' }), (error: unknown) => {
        assert.ok(error instanceof NotFoundError);
        assert.equal(error.code, 'model_not_found');
        assert.equal(error.param, 'model');
        return true;
      });
      await assert.rejects(client.embeddings.create({ model: 'lmsp-tiny', input: 'a', dimensions: 65 }), (error: unknown) => {
        assert.ok(error instanceof BadRequestError);
        assert.equal(error.code, 'invalid_request');
        assert.equal(error.param, 'dimensions');
        return true;
      });
      await assert.rejects(client.embeddings.create({ model: 'lmsp-tiny', input: ['a', 'x'.repeat(16_384)] }), (error: unknown) => {
        assert.ok(error instanceof BadRequestError);
        assert.equal(error.code, 'context_length_exceeded');
        assert.equal(error.param, 'input[1]');
        return true;
      });
    }));
});
