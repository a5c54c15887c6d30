/**
 * Each JSON Schema keyword docs/api.md lists as enforced, generated under by lmsp-tiny (whose
 * text is random) and checked with Ajv: a complete output must be valid, whatever the model
 * would rather write.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkSchemaSupported } from '../../src/engine/grammar/constraint.js';
import { runGeneration, sampling, withEngine } from '../helpers/engine.js';
import { schemaViolation } from '../helpers/schema-validator.js';
import { z } from 'zod';

const short = { type: 'string', maxLength: 8 };

const CASES: Array<[keyword: string, schema: Record<string, unknown>]> = [
  ['type', { type: 'object', properties: { s: short, n: { type: 'number' }, i: { type: 'integer' }, b: { type: 'boolean' }, z: { type: 'null' }, a: { type: 'array', items: { type: 'integer' }, maxItems: 3 } }, required: ['s', 'n', 'i', 'b', 'z', 'a'] }],
  ['type (a list: nullable)', { type: 'object', properties: { v: { type: ['integer', 'null'] }, w: { type: 'string', maxLength: 4, nullable: true } }, required: ['v', 'w'] }],
  ['properties, required', { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'boolean' }, c: { type: 'integer' } }, required: ['b'] }],
  ['additionalProperties: false', { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'], additionalProperties: false }],
  ['pattern of control characters JSON writes as \\u00XX', { type: 'object', properties: { v: { type: 'string', pattern: '^[\\v\\x01]{2}$' } }, required: ['v'] }],
  ['propertyNames every key satisfies (Zod\'s records)', { type: 'object', propertyNames: { type: 'string' }, additionalProperties: { type: 'integer', minimum: 0, maximum: 9 }, maxProperties: 3 }],
  // Zod 4's z.record(z.enum([...]), V) (every key required) and z.partialRecord (none).
  ['propertyNames as an enum or a const (Zod\'s records keyed by an enum)', { type: 'object', properties: {
    all: { type: 'object', propertyNames: { type: 'string', enum: ['x', 'y'] }, additionalProperties: { type: 'integer', minimum: 0, maximum: 9 }, required: ['x', 'y'] },
    some: { type: 'object', propertyNames: { enum: ['p', 'q', 'r'] }, properties: { q: { type: 'boolean' } }, additionalProperties: { type: 'null' } },
    one: { type: 'object', propertyNames: { const: 'k' }, required: ['k'] },
  }, required: ['all', 'some', 'one'] }],
  // Zod 4's z.intersection of loose objects: additionalProperties {} allows every extra property.
  ['allOf of objects whose additionalProperties is {}', { allOf: [
    { type: 'object', properties: { a: short }, required: ['a'], additionalProperties: {} },
    { type: 'object', properties: { b: { type: 'boolean' } }, required: ['b'], additionalProperties: {} },
  ] }],
  ['additionalProperties (schema), minProperties, maxProperties', { type: 'object', additionalProperties: { type: 'integer', minimum: 0, maximum: 9 }, minProperties: 1, maxProperties: 2 }],
  ['items, minItems, maxItems', { type: 'array', items: { type: 'integer', minimum: 0, maximum: 99 }, minItems: 2, maxItems: 4 }],
  ['prefixItems', { type: 'array', prefixItems: [{ type: 'string', maxLength: 3 }, { type: 'boolean' }], items: false }],
  ['uniqueItems', { type: 'array', items: { enum: ['red', 'green', 'blue'] }, uniqueItems: true, minItems: 2 }],
  ['enum', { type: 'object', properties: { e: { enum: ['a', 1, null, true, { x: 1 }, [1, 2]] } }, required: ['e'] }],
  ['const', { const: { k: 'v', n: [1] } }],
  ['anyOf', { type: 'array', items: { anyOf: [{ type: 'integer', minimum: 5, maximum: 9 }, { type: 'string', maxLength: 2 }] }, minItems: 3, maxItems: 3 }],
  ['oneOf', { type: 'array', minItems: 2, maxItems: 2, items: { oneOf: [
    { type: 'object', properties: { kind: { const: 'point' }, x: { type: 'integer' } }, required: ['kind', 'x'] },
    { type: 'object', properties: { kind: { const: 'label' }, text: short }, required: ['kind', 'text'] },
  ] } }],
  // Names every JavaScript object inherits are properties like any other: written when required.
  ['required names that Object.prototype has', { type: 'object', required: ['constructor', 'toString', '__proto__'], additionalProperties: { type: 'integer', minimum: 0, maximum: 9 } }],
  // Undeclared keys are kept apart from declared ones by a trie of their characters, a rule a node.
  ['additionalProperties beside properties, one with a 3,000-character name', { type: 'object', properties: {
    [`k${'x'.repeat(3000)}`]: { type: 'boolean' }, ab: { type: 'boolean' },
  }, additionalProperties: { type: 'integer', minimum: 0, maximum: 9 } }],
  ['allOf requiring an inherited name', { allOf: [{ type: 'object', properties: { a: short }, required: ['a', 'hasOwnProperty'] }, { required: ['valueOf'] }] }],
  ['allOf', { allOf: [{ type: 'object', properties: { a: short }, required: ['a'] }, { properties: { b: { type: 'integer' } }, required: ['b'] }] }],
  ['$ref, $defs (recursive)', { $defs: { list: { type: 'object', properties: { v: { type: 'integer', minimum: 0, maximum: 9 }, next: { anyOf: [{ $ref: '#/$defs/list' }, { type: 'null' }] } }, required: ['v', 'next'] } }, $ref: '#/$defs/list' }],
  ['minimum, maximum, exclusiveMinimum, exclusiveMaximum', { type: 'object', properties: {
    a: { type: 'integer', minimum: -5, maximum: 5 }, b: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 },
    c: { type: 'number', minimum: 10.5 }, d: { type: 'integer', exclusiveMaximum: -1000 },
  }, required: ['a', 'b', 'c', 'd'] }],
  ['multipleOf', { type: 'object', properties: { a: { type: 'integer', multipleOf: 3, minimum: 0, maximum: 30 }, b: { type: 'integer', multipleOf: 7 } }, required: ['a', 'b'] }],
  // Zod 4's z.number().int().multipleOf(5), and with .nonnegative() and .positive(): .int() writes ±(2^53 - 1).
  ['multipleOf beside the bounds Zod\'s .int() writes', { type: 'object', properties: {
    any: { type: 'integer', multipleOf: 5, minimum: -9007199254740991, maximum: 9007199254740991 },
    nonnegative: { type: 'integer', multipleOf: 5, minimum: 0, maximum: 9007199254740991 },
    positive: { type: 'integer', multipleOf: 5, exclusiveMinimum: 0, maximum: 9007199254740991 },
  }, required: ['any', 'nonnegative', 'positive'] }],
  ['minLength, maxLength', { type: 'array', items: { type: 'string', minLength: 3, maxLength: 6 }, minItems: 2, maxItems: 2 }],
  // Zod 4's z.base64(): top-level alternatives, each anchored at its start.
  ['pattern of alternatives each anchored (Zod\'s base64)', { type: 'object', properties: {
    b64: { type: 'string', pattern: '^$|^(?:[0-9a-zA-Z+/]{4})*(?:(?:[0-9a-zA-Z+/]{2}==)|(?:[0-9a-zA-Z+/]{3}=))?$', maxLength: 12 },
    either: { type: 'string', pattern: '^ab$|^c(d|e)$' },
  }, required: ['b64', 'either'] }],
  ['pattern', { type: 'object', properties: {
    code: { type: 'string', pattern: '^[A-Z]{2}-\\d{3}$' }, word: { type: 'string', pattern: '^(yes|no)[!?.]$' },
    quoted: { type: 'string', pattern: '^q"\\\\[\\t ]x{2,3}$' }, any: { type: 'string', pattern: '^.{3}\\S\\w$' },
  }, required: ['code', 'word', 'quoted', 'any'] }],
  ['format', { type: 'object', properties: Object.fromEntries(['date', 'time', 'date-time', 'uuid', 'email', 'hostname', 'ipv4', 'uri']
    .map((format) => [format, { type: 'string', format }])), required: ['date', 'time', 'date-time', 'uuid', 'email', 'hostname', 'ipv4', 'uri'] }],
  // OpenAPI's formats of numbers, as ajv-formats checks them: int32 in its range, int64, float, double.
  ['format of numbers', { type: 'object', properties: {
    a: { type: 'integer', format: 'int32' }, b: { type: 'integer', format: 'int64' }, c: { type: 'number', format: 'float' },
    d: { type: 'number', format: 'double' }, e: { type: 'number', format: 'int32', minimum: 2147483000 },
    f: { format: 'int32', maximum: -2147483000 },
  }, required: ['a', 'b', 'c', 'd', 'e', 'f'] }],
  // What Zod 4 writes for z.email(), z.uuid(), z.iso.datetime(), z.iso.date(), z.ipv4(), z.hostname(), z.nanoid().
  ['format with pattern, as Zod writes them', zodFormats()],
  ['format, pattern and lengths together', { type: 'object', properties: {
    mail: { type: 'string', format: 'email', maxLength: 18 },
    word: { type: 'string', pattern: '^[a-z]+$', minLength: 3, maxLength: 5 },
    guarded: { type: 'string', pattern: '^(?!x)(?!.*--)[a-z-]{3,8}$' },
  }, required: ['mail', 'word', 'guarded'] }],
];

function zodFormats(): Record<string, unknown> {
  const shape = z.object({
    email: z.email(), uuid: z.uuid(), when: z.iso.datetime(), day: z.iso.date(), ip: z.ipv4(), host: z.hostname(), id: z.nanoid(),
  });
  return z.toJSONSchema(shape) as Record<string, unknown>;
}

/** Two seeds per schema, more until one completes: every complete output is checked. */
const SEEDS = [1, 2, 3, 4, 5, 6];
const MAX_TOKENS = 1500;

describe('structured output enforces each listed JSON Schema keyword (LMSP 6.1)', () => {
  test('every case is supported', () => {
    for (const [keyword, schema] of CASES) assert.deepEqual(checkSchemaSupported(schema), { ok: true }, keyword);
  });

  test('outputs generated by lmsp-tiny under each keyword validate with Ajv', { timeout: 600_000 }, () => withEngine({}, async ({ engine, tiny }) => {
    for (const [keyword, schema] of CASES) {
      let complete = 0;
      for (const [index, seed] of SEEDS.entries()) {
        if (index >= 2 && complete > 0) break;
        const result = await runGeneration(engine, tiny, { messages: [{ role: 'user', content: 'Write JSON.' }], sampling: sampling(seed, MAX_TOKENS), format: { type: 'json_schema', schema } });
        if (result.finishReason !== 'stop') continue;
        complete += 1;
        assert.equal(schemaViolation(schema, result.text), null, `${keyword}, seed ${seed}: ${result.text}`);
      }
      assert.ok(complete > 0, `${keyword}: no seed completed within ${MAX_TOKENS} tokens`);
    }
  }));

  test('json_object gives one JSON object; greedy decoding too', { timeout: 120_000 }, () => withEngine({}, async ({ engine, tiny }) => {
    for (const temperature of [1, 0]) {
      const result = await runGeneration(engine, tiny, { messages: [{ role: 'user', content: 'x' }], sampling: sampling(3, 400, temperature), format: { type: 'json_object' } });
      assert.equal(result.finishReason, 'stop');
      const value: unknown = JSON.parse(result.text);
      assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), result.text);
    }
  }));
});
