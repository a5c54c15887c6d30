/**
 * Property, over HTTP (LMSP 6.1): for random schemas of the supported subset (objects, arrays,
 * enums, bounded integers, strings with lengths, nesting) and random seeds, every response that
 * lmsp-tiny completes under `text.format: json_schema` has text valid against its schema (Ajv),
 * and the same schema is shown back on the response. LMSP_PROPERTY_RUNS sets the runs (default 10).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import type { ResponseObject } from '../../src/api/types.js';
import { api, withService } from '../helpers/service.js';
import { schemaViolation } from '../helpers/schema-validator.js';

const RUNS = Number(process.env.LMSP_PROPERTY_RUNS ?? 10);
const MAX_TOKENS = 1200;

type Schema = Record<string, unknown>;

const integerSchema = fc.record({ min: fc.integer({ min: -100, max: 100 }), span: fc.nat(300) })
  .map(({ min, span }): Schema => ({ type: 'integer', minimum: min, maximum: min + span }));
const stringSchema = fc.record({ min: fc.nat(3), extra: fc.nat(8) }).map(({ min, extra }): Schema => ({ type: 'string', minLength: min, maxLength: min + extra }));
const enumSchema = fc.uniqueArray(fc.oneof(fc.string({ maxLength: 5 }), fc.integer({ min: -50, max: 50 }), fc.boolean()), { minLength: 1, maxLength: 4, selector: (value) => JSON.stringify(value) })
  .map((values): Schema => ({ enum: values }));
const leaf = fc.oneof(integerSchema, stringSchema, enumSchema, fc.constant({ type: 'boolean' }));

const { schema } = fc.letrec<{ schema: Schema; object: Schema; array: Schema }>((tie) => ({
  schema: fc.oneof({ maxDepth: 2, depthSize: 'small' }, leaf, tie('object'), tie('array')),
  object: fc.record({
    properties: fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), tie('schema'), { minKeys: 1, maxKeys: 4 }),
    requiredMask: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
  }).map(({ properties, requiredMask }): Schema => ({
    type: 'object', properties, required: Object.keys(properties).filter((_, index) => requiredMask[index]), additionalProperties: false,
  })),
  array: fc.record({ items: tie('schema'), min: fc.nat(2), extra: fc.nat(3) })
    .map(({ items, min, extra }): Schema => ({ type: 'array', items, minItems: min, maxItems: min + extra })),
}));

describe('structured output over HTTP, property-based (LMSP 6.1)', () => {
  test(`every completed response validates against its random schema (${RUNS} runs)`, { timeout: Math.max(300_000, RUNS * 30_000) }, (t) =>
    withService({}, async (service) => {
      let completed = 0;
      await fc.assert(fc.asyncProperty(schema, fc.integer({ min: 0, max: 2 ** 31 - 1 }), async (generated, seed) => {
        const format = { type: 'json_schema', name: 'generated', schema: generated, strict: true };
        const answer = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'JSON please', text: { format }, max_output_tokens: MAX_TOKENS, seed } });
        assert.equal(answer.status, 200, `schema ${JSON.stringify(generated)}`);
        const body = (await answer.json()) as ResponseObject;
        assert.deepEqual(body.text, JSON.parse(JSON.stringify({ format })), "the schema is shown back as sent");
        if (body.status !== 'completed') return;
        completed += 1;
        const text = body.output[0]!.content[0]!.text;
        assert.equal(schemaViolation(generated, text), null, `schema ${JSON.stringify(generated)}, seed ${seed}: ${text}`);
      }), { numRuns: RUNS });
      t.diagnostic(`${completed} of ${RUNS} responses completed within ${MAX_TOKENS} tokens; all valid`);
      assert.ok(completed >= Math.ceil(RUNS / 2), `only ${completed} of ${RUNS} responses completed`);
    }));
});
