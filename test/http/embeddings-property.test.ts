/**
 * A property of POST /v1/embeddings (LMSP 14) over random batches of random text, any Unicode:
 * every vector is unit length at the width asked for, each input's vector is the same alone as
 * in its batch, and base64 carries the float numbers exactly.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import type { EmbeddingList } from '../../src/api/embeddings.js';
import { api, withService, type TestService } from '../helpers/service.js';

async function embed(service: TestService, body: object): Promise<EmbeddingList> {
  const response = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'lmsp-tiny', ...body } });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return JSON.parse(text) as EmbeddingList;
}

const norm = (vector: readonly number[]) => Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));

describe('embeddings, property (LMSP 14)', () => {
  test('random batches: unit vectors of the asked width, the same alone as in a batch, base64 equal to float', { timeout: 180_000 }, () =>
    withService({}, async (service) => {
      const inputs = fc.array(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 6 });
      const dimensions = fc.option(fc.integer({ min: 1, max: 64 }), { nil: undefined });
      await fc.assert(fc.asyncProperty(inputs, dimensions, async (texts, width) => {
        const batch = await embed(service, { input: texts, dimensions: width });
        assert.equal(batch.data.length, texts.length);
        for (const item of batch.data) {
          const vector = item.embedding as number[];
          assert.equal(vector.length, width ?? 64);
          assert.ok(Math.abs(norm(vector) - 1) < 1e-6, `norm ${norm(vector)}`);
        }
        const encoded = await embed(service, { input: texts, dimensions: width, encoding_format: 'base64' });
        encoded.data.forEach((item, index) => {
          const bytes = Buffer.from(item.embedding as string, 'base64');
          const decoded = Array.from({ length: bytes.length / 4 }, (_, at) => bytes.readFloatLE(at * 4));
          assert.deepEqual(decoded, batch.data[index]!.embedding);
        });
        const last = texts.length - 1;
        const alone = await embed(service, { input: texts[last], dimensions: width });
        assert.deepEqual(alone.data[0]!.embedding, batch.data[last]!.embedding, 'alone as in the batch');
      }), { numRuns: 25, seed: 1414 });
    }));
});
