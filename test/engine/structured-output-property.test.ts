/**
 * Property: for random schemas of the supported subset (objects, arrays, enums, bounded numbers,
 * strings with lengths, nesting) and random seeds, every output lmsp-tiny completes under the
 * schema's grammar validates with Ajv. LMSP_PROPERTY_RUNS sets the number of runs (default 12).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { checkSchemaSupported } from '../../src/engine/grammar/constraint.js';
import { runGeneration, sampling, withEngine } from '../helpers/engine.js';
import { schemaViolation } from '../helpers/schema-validator.js';

const RUNS = Number(process.env.LMSP_PROPERTY_RUNS ?? 12);
const MAX_TOKENS = 1500;

type Schema = Record<string, unknown>;

const bound = fc.integer({ min: -2000, max: 2000 }).map((value) => value / 20);

const integerSchema = fc.record({ min: fc.option(fc.integer({ min: -100, max: 100 }), { nil: undefined }), span: fc.option(fc.nat(300), { nil: undefined }) })
  .map(({ min, span }): Schema => ({ type: 'integer', ...(min === undefined ? {} : { minimum: min }), ...(min !== undefined && span !== undefined ? { maximum: min + span } : {}) }));

const numberSchema = fc.record({
  low: fc.option(bound, { nil: undefined }), high: fc.option(bound, { nil: undefined }), exclusiveLow: fc.boolean(), exclusiveHigh: fc.boolean(),
}).map(({ low, high, exclusiveLow, exclusiveHigh }): Schema => {
  const schema: Schema = { type: 'number' };
  const [min, max] = low !== undefined && high !== undefined && high < low ? [high, low] : [low, high];
  if (min !== undefined) schema[exclusiveLow ? 'exclusiveMinimum' : 'minimum'] = min;
  if (max !== undefined) schema[exclusiveHigh ? 'exclusiveMaximum' : 'maximum'] = max;
  return schema;
});

const stringSchema = fc.record({ min: fc.nat(3), extra: fc.nat(8) }).map(({ min, extra }): Schema => ({ type: 'string', minLength: min, maxLength: min + extra }));

const enumSchema = fc.uniqueArray(fc.oneof(fc.string({ maxLength: 5 }), fc.integer({ min: -50, max: 50 }), fc.boolean()), { minLength: 1, maxLength: 4, selector: (value) => JSON.stringify(value) })
  .map((values): Schema => ({ enum: values }));

const leaf = fc.oneof(integerSchema, numberSchema, stringSchema, enumSchema, fc.constant({ type: 'boolean' }), fc.constant({ type: ['string', 'null'], maxLength: 4 }));

const { schema } = fc.letrec<{ schema: Schema; object: Schema; array: Schema }>((tie) => ({
  schema: fc.oneof({ maxDepth: 3, depthSize: 'small' }, leaf, tie('object'), tie('array')),
  object: fc.record({
    properties: fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), tie('schema'), { minKeys: 1, maxKeys: 4 }),
    requiredMask: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
    closed: fc.boolean(),
  }).map(({ properties, requiredMask, closed }): Schema => ({
    type: 'object',
    properties,
    required: Object.keys(properties).filter((_, index) => requiredMask[index]),
    ...(closed ? { additionalProperties: false } : {}),
  })),
  array: fc.record({ items: tie('schema'), min: fc.nat(2), extra: fc.nat(3) })
    .map(({ items, min, extra }): Schema => ({ type: 'array', items, minItems: min, maxItems: min + extra })),
}));

describe('structured output, property-based (LMSP 6.1)', () => {
  test(`every completed output validates against its random schema (${RUNS} runs)`, { timeout: Math.max(600_000, RUNS * 30_000) }, (t) =>
    withEngine({}, async ({ engine, tiny }) => {
      let completed = 0;
      let tried = 0;
      await fc.assert(fc.asyncProperty(schema, fc.integer({ min: 0, max: 2 ** 31 - 1 }), async (generated, seed) => {
        fc.pre(checkSchemaSupported(generated).ok);
        tried += 1;
        const result = await runGeneration(engine, tiny, { messages: [{ role: 'user', content: 'JSON please' }], sampling: sampling(seed, MAX_TOKENS), format: { type: 'json_schema', schema: generated } });
        if (result.finishReason !== 'stop') return;
        completed += 1;
        assert.equal(schemaViolation(generated, result.text), null, `schema ${JSON.stringify(generated)}, seed ${seed}: ${result.text}`);
      }), { numRuns: RUNS });
      t.diagnostic(`${completed} of ${tried} generations completed within ${MAX_TOKENS} tokens; all valid`);
      assert.ok(completed >= Math.ceil(tried / 2), `only ${completed} of ${tried} generations completed`);
    }));
});
