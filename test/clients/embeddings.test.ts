/**
 * Embeddings through the clients people use besides the openai package, unchanged but for the
 * base URL and the key, against the real service (LMSP 14): the Vercel AI SDK (`ai` 6 with
 * `@ai-sdk/openai-compatible` 2: `embed`, `embedMany`) and LangChain JS (`@langchain/openai`
 * `OpenAIEmbeddings`: `embedQuery`, `embedDocuments`).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { OpenAIEmbeddings } from '@langchain/openai';
import { cosineSimilarity, embed, embedMany } from 'ai';
import type { EmbeddingList } from '../../src/api/embeddings.js';
import { api, pairClient, withService, type TestService } from '../helpers/service.js';

async function floatsOf(service: TestService, input: string[], dimensions?: number): Promise<number[][]> {
  const response = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'lmsp-tiny', input, dimensions } });
  assert.equal(response.status, 200);
  return ((await response.json()) as EmbeddingList).data.map((item) => item.embedding as number[]);
}

const DOCUMENTS = ['The cat sat on the mat.', 'Stocks fell sharply today.', 'A kitten slept on a rug.'];

describe('real clients: embeddings', () => {
  test('Vercel AI SDK: embed and embedMany give the service\'s vectors, in order, with usage', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const { token } = await pairClient(service, ['responses'], 'ai-sdk');
      const lmsp = createOpenAICompatible({ name: 'lmsp', baseURL: `${service.url}/v1`, apiKey: token });
      const model = lmsp.embeddingModel('lmsp-tiny');
      const expected = await floatsOf(service, DOCUMENTS);

      const one = await embed({ model, value: DOCUMENTS[0]! });
      assert.deepEqual(one.embedding, expected[0]);
      assert.equal(one.usage.tokens, 2 + DOCUMENTS[0]!.length);

      const many = await embedMany({ model, values: DOCUMENTS });
      assert.deepEqual(many.embeddings, expected);
      assert.equal(many.usage.tokens, DOCUMENTS.reduce((sum, text) => sum + 2 + text.length, 0));
      // Unit vectors: the cosine similarity is the dot product.
      const dot = many.embeddings[0]!.reduce((sum, value, index) => sum + value * many.embeddings[2]![index]!, 0);
      assert.ok(Math.abs(cosineSimilarity(many.embeddings[0]!, many.embeddings[2]!) - dot) < 1e-6);

      const short = await embedMany({ model, values: DOCUMENTS.slice(0, 2), providerOptions: { lmsp: { dimensions: 16 } } });
      assert.deepEqual(short.embeddings, await floatsOf(service, DOCUMENTS.slice(0, 2), 16));

      await assert.rejects(embed({ model: lmsp.embeddingModel('nope'), value: 'a', maxRetries: 0 }), (error: Error & { statusCode?: number }) => {
        assert.equal(error.statusCode, 404);
        assert.match(error.message, /nope/);
        return true;
      });
    }));

  test('LangChain OpenAIEmbeddings: embedQuery and embedDocuments (the openai SDK\'s base64 underneath), in batches', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const { token } = await pairClient(service, ['responses'], 'langchain');
      const expected = await floatsOf(service, DOCUMENTS);
      const embeddings = new OpenAIEmbeddings({ model: 'lmsp-tiny', apiKey: token, configuration: { baseURL: `${service.url}/v1` } });
      assert.deepEqual(await embeddings.embedQuery(DOCUMENTS[0]!), expected[0]);
      assert.deepEqual(await embeddings.embedDocuments(DOCUMENTS), expected);

      const batched = new OpenAIEmbeddings({ model: 'lmsp-tiny', apiKey: token, batchSize: 2, configuration: { baseURL: `${service.url}/v1` } });
      assert.deepEqual(await batched.embedDocuments(DOCUMENTS), expected, 'two requests, joined in order');

      const narrow = new OpenAIEmbeddings({ model: 'lmsp-tiny', apiKey: token, dimensions: 8, configuration: { baseURL: `${service.url}/v1` } });
      assert.deepEqual(await narrow.embedDocuments(DOCUMENTS), await floatsOf(service, DOCUMENTS, 8));

      const missing = new OpenAIEmbeddings({ model: 'nope', apiKey: token, maxRetries: 0, configuration: { baseURL: `${service.url}/v1` } });
      await assert.rejects(missing.embedQuery('a'), /nope|404/);
    }));
});
