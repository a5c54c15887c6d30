import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';
import { checkSchemaSupported, checkToolsSupported, constraintGrammar, type ToolsSupport } from '../../src/engine/grammar/constraint.js';
import { boundedInteger, boundedNumber, integerRange, patternToRegExpSource, type NumberBounds } from '../../src/engine/grammar/numbers.js';
import { PLAIN_TOOL_CALL_SYNTAX } from '../../src/engine/plain-layout.js';
import { MAX_GROUP_DEPTH } from '../../src/engine/grammar/regex.js';

function exactly(source: string): RegExp {
  return new RegExp(`^(?:${source})$`);
}

describe('numbers under JSON Schema bounds', () => {
  test('an integer range accepts exactly the integers in it, written without leading zeros', () => {
    fc.assert(fc.property(fc.integer({ min: -1200, max: 1200 }), fc.integer({ min: 0, max: 1500 }), (low, width) => {
      const high = low + width;
      const pattern = integerRange(BigInt(low), BigInt(high));
      assert.ok(pattern);
      const regex = exactly(patternToRegExpSource(pattern));
      for (let value = low - 30; value <= high + 30; value++) {
        assert.equal(regex.test(String(value)), value >= low && value <= high, `${value} in [${low}, ${high}]`);
      }
      assert.equal(regex.test('007'), false);
      assert.equal(regex.test('-0'), false);
    }), { numRuns: 60 });
  });

  test('large and open ranges stop at 15 digits', () => {
    const positive = exactly(patternToRegExpSource(integerRange(1n, null)!));
    assert.ok(positive.test('999999999999999'));
    assert.equal(positive.test('1000000000000000'), false);
    assert.equal(positive.test('0'), false);
    const wide = exactly(patternToRegExpSource(integerRange(-123456789012n, 98765432109876n)!));
    for (const value of ['-123456789012', '-123456789013', '98765432109876', '98765432109877', '0', '-1', '5000000']) {
      const n = BigInt(value);
      assert.equal(wide.test(value), n >= -123456789012n && n <= 98765432109876n, value);
    }
  });

  test('every number the bounded pattern accepts lies within the bounds', () => {
    const bounds = fc.record({
      minimum: fc.option(fc.double({ min: -50, max: 50, noNaN: true }), { nil: null }),
      maximum: fc.option(fc.double({ min: -50, max: 50, noNaN: true }), { nil: null }),
      exclusiveMinimum: fc.boolean(),
      exclusiveMaximum: fc.boolean(),
    });
    const numberText = fc.tuple(fc.integer({ min: -80, max: 80 }), fc.option(fc.integer({ min: 0, max: 9999 }), { nil: null }))
      .map(([whole, fraction]) => `${whole}${fraction === null ? '' : `.${String(fraction).padStart(4, '0')}`}`);
    fc.assert(fc.property(bounds, fc.array(numberText, { minLength: 40, maxLength: 40 }), (b: NumberBounds, texts) => {
      for (const integer of [true, false]) {
        const pattern = integer ? boundedInteger(b) : boundedNumber(b);
        if (!pattern) continue;
        const regex = exactly(patternToRegExpSource(pattern));
        for (const text of texts) {
          if (!regex.test(text)) continue;
          const value = Number(text);
          if (integer) assert.ok(Number.isInteger(value), text);
          if (b.minimum !== null) assert.ok(b.exclusiveMinimum ? value > b.minimum : value >= b.minimum, `${text} >= ${b.minimum}`);
          if (b.maximum !== null) assert.ok(b.exclusiveMaximum ? value < b.maximum : value <= b.maximum, `${text} <= ${b.maximum}`);
        }
      }
    }), { numRuns: 300 });
  });

  test('a number with a fraction parses strictly inside exclusive bounds at every magnitude, however many nines or zeros it writes', () => {
    // 99.999999999999999 spells less than 100 but parses to 100; 1e12 + 7e-15 parses to 1e12.
    for (let magnitude = 1; magnitude <= 15; magnitude++) {
      const top = 10 ** magnitude;
      const bottom = 10 ** (magnitude - 1);
      const regex = exactly(patternToRegExpSource(boundedNumber({ minimum: bottom, maximum: top, exclusiveMinimum: true, exclusiveMaximum: true })!));
      const texts: string[] = [];
      for (let length = 1; length <= 16; length++) {
        texts.push(`${top - 1}.${'9'.repeat(length)}`, `${bottom}.${'0'.repeat(length - 1)}1`);
      }
      fc.assert(fc.property(fc.bigInt({ min: BigInt(bottom), max: BigInt(top - 1) }), fc.stringMatching(/^[09]{0,15}[19]$/), (whole, digits) => {
        texts.push(`${whole}.${digits}`);
      }), { numRuns: 200 });
      let accepted = 0;
      for (const text of texts) {
        if (!regex.test(text)) continue;
        accepted += 1;
        const value = Number(text);
        assert.ok(value > bottom && value < top, `${text} parses to ${value}, outside (${bottom}, ${top})`);
      }
      if (magnitude < 15) assert.ok(accepted > 0, `numbers with a fraction of ${magnitude}-digit integers are written`);
    }
  });

  test('a fraction is written where its whole unit interval fits, never as k.0', () => {
    const regex = exactly(patternToRegExpSource(boundedNumber({ minimum: -2.5, maximum: 3, exclusiveMinimum: false, exclusiveMaximum: true })!));
    for (const text of ['-2', '0', '2', '2.75', '0.5', '-1.5', '-0.25']) assert.ok(regex.test(text), text);
    for (const text of ['3', '-3', '2.0', '-2.5', '3.5', '-2.25']) assert.equal(regex.test(text), false, text);
    assert.equal(boundedNumber({ minimum: 0.2, maximum: 0.7, exclusiveMinimum: false, exclusiveMaximum: false }), null, 'no integer, no whole unit interval');
  });
});

describe('which JSON Schemas can be enforced (LMSP 6.1 unsupported_schema)', () => {
  const supported: Array<[string, unknown]> = [
    ['an empty schema', {}],
    ['true', true],
    ['nullable types', { type: ['string', 'null'] }],
    ['OpenAPI nullable', { type: 'integer', nullable: true }],
    ['OpenAPI nullable with an empty type list: only null', { type: [], nullable: true }],
    ['annotations', { title: 't', description: 'd', examples: [1], default: 2, $comment: 'c', deprecated: false, 'x-vendor': 1, type: 'number' }],
    ['recursion through $defs', { $defs: { node: { type: 'object', properties: { next: { anyOf: [{ $ref: '#/$defs/node' }, { type: 'null' }] } } } }, $ref: '#/$defs/node' }],
    ['draft-07 definitions', { definitions: { a: { type: 'string' } }, type: 'array', items: { $ref: '#/definitions/a' } }],
    ['oneOf of different types', { oneOf: [{ type: 'string' }, { type: 'integer' }, { type: 'null' }] }],
    ['oneOf of tagged objects', { oneOf: [
      { type: 'object', properties: { kind: { const: 'a' }, x: { type: 'number' } }, required: ['kind', 'x'] },
      { type: 'object', properties: { kind: { const: 'b' } }, required: ['kind'] },
    ] }],
    ['allOf of open objects', { allOf: [{ type: 'object', properties: { a: { type: 'string' } }, required: ['a'] }, { properties: { b: { type: 'integer' } } }] }],
    ['uniqueItems over an enum', { type: 'array', items: { enum: ['a', 'b', 'c'] }, uniqueItems: true, minItems: 1 }],
    ['multipleOf with bounds', { type: 'integer', multipleOf: 5, minimum: 0, maximum: 100 }],
    ['multipleOf without bounds', { type: 'integer', multipleOf: 7 }],
    ['multipleOf beside the bounds Zod\'s .int() writes', { type: 'integer', multipleOf: 5, minimum: -9007199254740991, maximum: 9007199254740991 }],
    ['multipleOf of a non-negative Zod .int()', { type: 'integer', multipleOf: 5, minimum: 0, maximum: 9007199254740991 }],
    ['a map', { type: 'object', additionalProperties: { type: 'boolean' }, maxProperties: 3 }],
    ['a pattern', { type: 'string', pattern: '^[A-Z]{2}-\\d{3}(x|y)?$' }],
    ['a pattern of alternatives each anchored at the start (Zod\'s z.base64())', { type: 'string', pattern: '^$|^(?:[0-9a-zA-Z+/]{4})*(?:(?:[0-9a-zA-Z+/]{2}==)|(?:[0-9a-zA-Z+/]{3}=))?$' }],
    ['the same beside a format: a search anchored at the start of each alternative', { type: 'string', format: 'email', pattern: '^a|^b' }],
    ['a format', { type: 'string', format: 'date-time' }],
    // Zod 4 writes its string formats as format and pattern together.
    ['format with pattern (Zod\'s e-mail, with lookaheads)', { type: 'string', format: 'email', pattern: "^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$", maxLength: 254 }],
    ['format with pattern (Zod\'s uuid)', { type: 'string', format: 'uuid', pattern: '^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$' }],
    ['format with a length', { type: 'string', format: 'email', maxLength: 24 }],
    ['a pattern with a length', { type: 'string', pattern: 'a+', minLength: 2 }],
    ['a pattern that begins with lookaheads', { type: 'string', pattern: '^(?!x)(?!.*--)[a-z-]{3,8}$' }],
    ['a format lmsp does not know, beside the pattern that says what it is', { type: 'string', format: 'nanoid', pattern: '^[a-zA-Z0-9_-]{21}$' }],
    ['the formats of numbers', { type: 'object', properties: { a: { type: 'integer', format: 'int32' }, b: { type: 'number', format: 'double' } } }],
    ['a string format on a type that allows strings and integers', { type: ['integer', 'string'], format: 'date' }],
    ['a number format without a type', { format: 'int32' }],
    // A control character without a short JSON escape is written as \u00XX (found by the property test below).
    ['a pattern of a control character with no short escape', { pattern: '\\v' }],
    // Zod 4's z.record(z.string(), ...): a key is always a string.
    ['propertyNames that every key satisfies', { type: 'object', propertyNames: { type: 'string' }, additionalProperties: { type: 'boolean' } }],
    ['propertyNames as an enum (Zod 4\'s z.record of an enum)', { type: 'object', propertyNames: { type: 'string', enum: ['a', 'b'] }, additionalProperties: { type: 'number' }, required: ['a', 'b'] }],
    ['propertyNames as a const', { type: 'object', propertyNames: { const: 'x' }, additionalProperties: { type: 'number' } }],
    ['allOf of objects whose additionalProperties is {} (Zod 4\'s intersection of loose objects)', { allOf: [
      { type: 'object', properties: { a: { type: 'number' } }, required: ['a'], additionalProperties: {} },
      { type: 'object', properties: { b: { type: 'boolean' } }, required: ['b'], additionalProperties: {} },
    ] }],
    ['a recursive tree whose children may be none', { $defs: { node: { type: 'object', properties: { v: { type: 'integer' }, children: { type: 'array', items: { $ref: '#/$defs/node' } } }, required: ['v', 'children'] } }, $ref: '#/$defs/node' }],
    ['a required recursion with a way out', { type: 'object', properties: { next: { anyOf: [{ $ref: '#' }, { type: 'null' }] } }, required: ['next'] }],
    ['propertyNames true or {}', { type: 'object', properties: { a: { type: 'object', propertyNames: true } }, propertyNames: { description: 'any' } }],
  ];
  for (const [name, schema] of supported) {
    test(`supported: ${name}`, () => assert.deepEqual(checkSchemaSupported(schema), { ok: true }));
  }

  const unsupported: Array<[string, unknown, string, string]> = [
    ['not', { type: 'object', properties: { a: { not: { type: 'string' } } } }, 'not', '/properties/a/not'],
    ['if/then', { if: { type: 'string' }, then: { minLength: 1 } }, 'if', '/if'],
    ['patternProperties', { type: 'object', patternProperties: { '^x': {} } }, 'patternProperties', '/patternProperties'],
    ['propertyNames that some key could fail', { type: 'object', properties: { m: { type: 'object', propertyNames: { maxLength: 3 } } } }, 'propertyNames', '/properties/m/propertyNames'],
    ['propertyNames as an enum of numbers', { type: 'object', propertyNames: { enum: [1, 2] } }, 'propertyNames', '/propertyNames'],
    ['propertyNames that leave out a required property', { type: 'object', propertyNames: { enum: ['a'] }, required: ['b'] }, 'propertyNames', '/propertyNames'],
    ['a required property that is the whole schema again: no finite value', { type: 'object', properties: { a: { $ref: '#' } }, required: ['a'] }, '$ref', '/$ref'],
    ['a required cycle through two definitions', { $defs: {
      a: { type: 'object', properties: { b: { $ref: '#/$defs/b' } }, required: ['b'] },
      b: { type: 'array', items: { $ref: '#/$defs/a' }, minItems: 1 },
    }, $ref: '#/$defs/a' }, '$ref', '/$ref'],
    ['propertyNames of another type', { type: 'object', propertyNames: { type: 'integer' } }, 'propertyNames', '/propertyNames'],
    ['contains', { type: 'array', contains: { type: 'string' } }, 'contains', '/contains'],
    ['an unknown format', { type: 'string', format: 'ipv6' }, 'format', '/format'],
    ['format with a length no value of it has', { type: 'string', format: 'date', maxLength: 5 }, 'maxLength', '/maxLength'],
    ['format with a pattern no value of it matches', { type: 'string', format: 'date', pattern: '^x' }, 'pattern', '/pattern'],
    ['a pattern with a lookahead not at the start', { type: 'string', pattern: '^a(?=a)b' }, 'pattern', '/pattern'],
    ['a pattern with a lookahead, not anchored', { type: 'string', pattern: '(?=a)b' }, 'pattern', '/pattern'],
    ['a pattern with a backreference', { type: 'string', pattern: '(a)\\1' }, 'pattern', '/pattern'],
    ['a pattern with a $ before more', { type: 'string', pattern: '(a$)b' }, 'pattern', '/pattern'],
    ['a string format on an integer', { type: 'integer', format: 'date' }, 'format', '/format'],
    ['an unknown format on a number, nested', { type: 'object', properties: { n: { type: 'number', format: 'decimal128' } } }, 'format', '/properties/n/format'],
    ['int32 with bounds outside its range', { type: 'integer', format: 'int32', minimum: 3000000000 }, 'minimum', '/minimum'],
    ['an unknown format with a length only', { type: 'string', format: 'ipv6', maxLength: 40 }, 'format', '/format'],
    ['oneOf whose branches overlap', { oneOf: [{ type: 'number' }, { type: 'integer' }] }, 'oneOf', '/oneOf'],
    ['a fractional multipleOf', { type: 'number', multipleOf: 0.01 }, 'multipleOf', '/multipleOf'],
    ['a remote $ref', { $ref: 'https://example.com/schema.json' }, '$ref', '/$ref'],
    ['a missing $ref', { items: { $ref: '#/$defs/missing' }, type: 'array' }, '$ref', '/items/$ref'],
    ['a $ref into what every object inherits', { type: 'array', items: { $ref: '#/__proto__' } }, '$ref', '/items/$ref'],
    ['a $ref to an inherited name under $defs', { $defs: {}, $ref: '#/$defs/toString' }, '$ref', '/$ref'],
    ['a required name Object.prototype has, closed by additionalProperties: false', { type: 'object', properties: {}, required: ['toString'], additionalProperties: false }, 'required', '/required'],
    ['left recursion', { $defs: { a: { anyOf: [{ $ref: '#/$defs/a' }, { type: 'null' }] } }, $ref: '#/$defs/a' }, '$ref', '/$defs/a/anyOf/0/$ref'],
    ['bounds with no value the service can write', { type: 'number', minimum: 0.2, maximum: 0.7 }, 'minimum', '/minimum'],
    ['minProperties beyond the required ones', { type: 'object', properties: { a: {} }, minProperties: 1 }, 'minProperties', '/minProperties'],
    ['uniqueItems over open items', { type: 'array', items: { type: 'string' }, uniqueItems: true }, 'uniqueItems', '/uniqueItems'],
    ['allOf with a closed object', { allOf: [{ type: 'object', additionalProperties: false }, { properties: { a: {} } }] }, 'allOf', '/allOf'],
    ['a minLength too long to spell out', { type: 'string', minLength: 20_000 }, 'minLength', '/minLength'],
    ['false', { type: 'object', properties: { a: false }, required: ['a'] }, 'false', '/properties/a'],
    ['an empty type list', { type: [] }, 'type', '/type'],
    ['an empty type list in a property', { type: 'object', properties: { a: { type: [] } }, required: ['a'] }, 'type', '/properties/a/type'],
    ['an empty type list in prefixItems', { type: 'array', prefixItems: [{ type: [] }], minItems: 1 }, 'type', '/prefixItems/0/type'],
    ['an unknown keyword', { type: 'string', minLenght: 3 }, 'minLenght', '/minLenght'],
    // Values no validator accepts, where the keyword cannot apply or is never reached.
    ['a pattern that is no regular expression, on an integer', { type: 'integer', pattern: '([' }, 'pattern', '/pattern'],
    ['a negative minLength on an integer', { type: 'integer', minLength: -5 }, 'minLength', '/minLength'],
    ['a minimum that is a string, on a string', { type: 'string', maxLength: 3, minimum: 'x' }, 'minimum', '/minimum'],
    ['an unknown type in a definition never used', { $defs: { u: { type: 'nope' } }, type: 'integer' }, 'type', '/$defs/u/type'],
    ['nullable that is not a boolean', { type: 'integer', nullable: 'yes' }, 'nullable', '/nullable'],
    ['a title that is not a string', { type: 'integer', title: { x: 1 } }, 'title', '/title'],
    ['uniqueItems that is not a boolean', { type: 'array', items: { enum: [1, 2] }, uniqueItems: 'yes', minItems: 2, maxItems: 2 }, 'uniqueItems', '/uniqueItems'],
    ['a property schema that is a number', { type: 'object', properties: { a: 5 } }, 'properties', '/properties'],
    ['a keyword named as what every object inherits, holding a number', { type: 'integer', toString: 0 }, 'toString', '/toString'],
    ['$id below the root, which would change what $ref resolves against', {
      $id: 'http://x.test/root.json', $defs: { c: { type: 'string' } }, type: 'object',
      properties: { v: { $id: 'http://x.test/b.json', $defs: { c: { type: 'boolean' } }, $ref: '#/$defs/c' } },
    }, '$id', '/properties/v/$id'],
    ['minProperties above 1 on a map, whose keys could repeat', { type: 'object', additionalProperties: { type: 'integer' }, minProperties: 2 }, 'minProperties', '/minProperties'],
    ['minProperties above 1 on an open object', { type: 'object', minProperties: 2 }, 'minProperties', '/minProperties'],
  ];
  for (const [name, schema, keyword, pointer] of unsupported) {
    test(`unsupported, naming the keyword: ${name}`, () => {
      const result = checkSchemaSupported(schema);
      assert.equal(result.ok, false);
      if (result.ok) return;
      assert.equal(result.keyword, keyword);
      assert.equal(result.pointer, pointer);
      assert.ok(result.message.length > 0);
    });
  }

  test('groups nested past the limit are refused naming pattern, with a message of bounded length, not a stack overflow', () => {
    const nested = (depth: number) => `^${'(?:'.repeat(depth)}a${')'.repeat(depth)}$`;
    assert.deepEqual(checkSchemaSupported({ type: 'string', pattern: nested(MAX_GROUP_DEPTH) }), { ok: true });
    for (const depth of [MAX_GROUP_DEPTH + 1, 5000]) {
      const result = checkSchemaSupported({ type: 'object', properties: { s: { type: 'string', pattern: nested(depth) } } });
      assert.equal(result.ok, false, `depth ${depth}`);
      if (result.ok) return;
      assert.equal(result.keyword, 'pattern');
      assert.equal(result.pointer, '/properties/s/pattern');
      assert.match(result.message, /nested more than 64 deep/);
      assert.ok(result.message.length < 400, `a message of ${result.message.length} characters`);
    }
  });

  // Each of these took minutes of the request thread before the parser read them in one pass
  // (a literal: every item looked at all those after it; a quantifier: the rest of the pattern
  // was copied at each `{`). The test's timeout is what fails then.
  test('a pattern holds at most 10,000 alternatives, which are read quickly', { timeout: 30_000 }, () => {
    const words = (n: number) => `^(${Array.from({ length: n }, (_, i) => `z${i}`).join('|')})$`;
    assert.deepEqual(checkSchemaSupported({ type: 'string', pattern: words(10_001) }), { ok: true });
    const refused = checkSchemaSupported({ type: 'string', pattern: words(10_002) });
    assert.deepEqual(refused.ok ? null : [refused.keyword, /more than 10000 alternatives/.test(refused.message)], ['pattern', true]);
  });

  test('long patterns are read in one pass: 200,000 characters of literal, of bounded quantifiers', { timeout: 30_000 }, () => {
    for (const pattern of [`^${'a'.repeat(200_000)}$`, `^${'a{2,5}'.repeat(33_000)}$`]) {
      assert.deepEqual(checkSchemaSupported({ type: 'string', pattern }), { ok: true });
    }
  });

  test('an optional property whose every value would nest without end is not offered; one that can end is', () => {
    const endless = { type: 'object', properties: { n: { $ref: '#/$defs/x' } }, required: ['n'] };
    // The rules the root reaches, as text: what the model can be made to write.
    const grammarOf = (schema: Record<string, unknown>) => {
      const grammar = constraintGrammar({ format: { type: 'json_schema', schema }, tools: [], toolChoice: 'auto', parallelToolCalls: true }, PLAIN_TOOL_CALL_SYNTAX).grammar!;
      const bodies = new Map(grammar.trim().split('\n').map((line) => line.split(' ::= ') as [string, string]));
      const reached = new Set<string>();
      const visit = (name: string) => {
        if (reached.has(name)) return;
        reached.add(name);
        const names = bodies.get(name)!.replace(/"(\\.|[^"\\])*"|\[(\\.|[^\]\\])*\]/g, ' ').match(/[a-z0-9-]+/g) ?? [];
        for (const next of names) if (bodies.has(next)) visit(next);
      };
      visit('root');
      return [...reached].map((name) => bodies.get(name)).join('\n');
    };
    const never = grammarOf({ $defs: { x: endless }, type: 'object', properties: { a: { $ref: '#/$defs/x' }, b: { type: 'integer' } } });
    assert.doesNotMatch(never, /\\"a\\"/, 'the property that cannot end is not in the grammar');
    assert.match(never, /\\"b\\"/);
    // The same in an anyOf: the branch that cannot end is dropped, the other kept.
    const branch = grammarOf({ $defs: { x: endless }, type: 'object', properties: { a: { anyOf: [{ $ref: '#/$defs/x' }, { type: 'null' }] } }, required: ['a'] });
    assert.match(branch, /\\"a\\"/);
    assert.doesNotMatch(branch, /\\"n\\"/);
    // A recursion that can end keeps its property.
    const ends = grammarOf({ $defs: { x: { type: 'object', properties: { n: { $ref: '#/$defs/x' } } } }, type: 'object', properties: { a: { $ref: '#/$defs/x' } } });
    assert.match(ends, /\\"a\\"/);
    assert.match(ends, /\\"n\\"/);
  });

  test('a refusal under allOf names the part it is in', () => {
    const pointerOf = (schema: unknown) => {
      const result = checkSchemaSupported(schema);
      return result.ok ? null : result.pointer;
    };
    assert.equal(pointerOf({ allOf: [{ type: 'integer', multipleOf: 7, maximum: 0, minimum: -1e9 }] }), '/allOf/0/multipleOf');
    assert.equal(pointerOf({ allOf: [{ type: 'object', properties: { a: { type: 'integer' } } }, { type: 'object', properties: { b: { not: {} } } }] }),
      '/allOf/1/properties/b/not');
    assert.equal(pointerOf({ type: 'object', properties: { c: { not: {} } }, allOf: [{ type: 'object', properties: { a: { type: 'integer' } } }] }), '/properties/c/not');
    // A part given as a $ref is named where it is defined.
    assert.equal(pointerOf({ $defs: { A: { type: 'object', properties: { a: { type: 'integer' } } }, B: { type: 'object', properties: { b: { not: {} } } } },
      allOf: [{ $ref: '#/$defs/A' }, { $ref: '#/$defs/B' }] }), '/$defs/B/properties/b/not');
  });

  // Each of these took the request thread for seconds, or overflowed its stack into a 500: the
  // test's timeout is what fails when they do again.
  test('thousands of values, branches, tools or characters: an answer within the budget, never a stack overflow', { timeout: 60_000 }, () => {
    const range = <T>(n: number, f: (i: number) => T) => Array.from({ length: n }, (_, i) => f(i));
    const keywordOf = (result: ToolsSupport) => (result.ok ? 'ok' : result.keyword);
    // uniqueItems: a rule a state, made without recursion, up to the grammar's size.
    assert.equal(keywordOf(checkSchemaSupported({ type: 'array', uniqueItems: true, items: { enum: range(6000, (i) => i) } })), 'size');
    assert.equal(keywordOf(checkSchemaSupported({ type: 'array', uniqueItems: true, items: { enum: range(30, (i) => i) }, minItems: 5 })), 'ok');
    // A declared key thousands of characters long beside additionalProperties.
    assert.equal(keywordOf(checkSchemaSupported({ type: 'object', additionalProperties: { type: 'integer' }, properties: { [`x${'y'.repeat(6000)}`]: { type: 'integer' } } })), 'ok');
    // oneOf: literals and tagged objects are told apart in one pass; other branches pair by pair, up to a bound.
    assert.equal(keywordOf(checkSchemaSupported({ oneOf: range(10_000, (i) => ({ const: i })) })), 'ok');
    assert.equal(keywordOf(checkSchemaSupported({ oneOf: [...range(20_000, (i) => ({ const: i })), { const: 7 }] })), 'oneOf');
    // Enum and const values: at most 10,000 in one grammar, whatever keywords write them (llama.cpp steps each).
    assert.equal(keywordOf(checkSchemaSupported({ enum: range(10_000, (i) => `z${i}`) })), 'ok');
    const values = checkSchemaSupported({ type: 'object', properties: { a: { enum: range(6000, (i) => `a${i}`) }, b: { enum: range(6000, (i) => `b${i}`) } } });
    assert.deepEqual(values.ok ? null : [values.keyword, values.pointer], ['enum', '/properties/b/enum']);
    assert.equal(keywordOf(checkSchemaSupported({ anyOf: range(10_001, (i) => ({ const: i })) })), 'const');
    const tagged = (i: number) => ({ type: 'object', properties: { kind: { const: `k${i}` }, v: { type: 'integer' } }, required: ['kind'] });
    assert.equal(keywordOf(checkSchemaSupported({ oneOf: range(10_000, tagged) })), 'ok');
    assert.equal(keywordOf(checkSchemaSupported({ oneOf: [...range(10_000, tagged), tagged(3)] })), 'oneOf');
    const mixed = (i: number) => (i % 2 === 0 ? tagged(i) : { type: 'string', const: `s${i}` });
    assert.equal(keywordOf(checkSchemaSupported({ oneOf: range(500, mixed) })), 'ok');
    const tooMany = checkSchemaSupported({ oneOf: range(3000, mixed) });
    assert.deepEqual(tooMany.ok ? null : [tooMany.keyword, tooMany.pointer], ['oneOf', '/oneOf']);
    // Tools: one grammar, so one size limit, for all of them.
    const tool = (i: number) => ({ name: `t${i}`, parameters: { type: 'object', properties: { x: { type: 'array', uniqueItems: true, minItems: 100, maxItems: 200, items: { enum: range(200, (j) => j) } } } } });
    assert.equal(keywordOf(checkToolsSupported([tool(0)])), 'ok');
    const tools = checkToolsSupported(range(100, tool));
    assert.deepEqual(tools.ok ? null : [tools.keyword, tools.toolIndex! < 100], ['size', true]);
    // Tools whose parameters recurse: whether each can end is asked of the rules it added, not of
    // all the rules of the tools before it again (that was quadratic: 37 s for 300 tools).
    const big = { type: 'object', properties: Object.fromEntries(range(13, (i) => [`s${i}`, { type: 'string', pattern: `^[a-${'bcdefghijklmn'[i]}]{4000}$` }])) };
    const recursive = range(600, (i) => ({ name: `r${i}`, parameters: { type: 'object', properties: { n: { $ref: '#' } } } }));
    assert.equal(keywordOf(checkToolsSupported([{ name: 'big', parameters: big }, ...recursive])), 'ok');
    // A format the model may write instead of calls (tool_choice auto) shares their grammar too.
    const letters = 'abcdefghijklmnopqrstuvwxyz';
    const wide = (upper: boolean) => {
      const set = upper ? letters.toUpperCase() : letters;
      const properties = Object.fromEntries(range(10, (i) => [`p${i}`, { type: 'string', pattern: `^[${set[0]}-${set[i + 1]}]{4000}$` }]));
      return { type: 'object', properties, required: Object.keys(properties) };
    };
    assert.equal(keywordOf(checkSchemaSupported(wide(false))), 'ok');
    assert.equal(keywordOf(checkToolsSupported([{ name: 'f', parameters: wide(true) }])), 'ok');
    const both = checkToolsSupported([{ name: 'f', parameters: wide(true) }], wide(false));
    assert.deepEqual(both.ok ? null : [both.keyword, both.toolIndex], ['size', 0]);
  });

  test('pointers escape ~ and / (RFC 6901)', () => {
    const result = checkSchemaSupported({ type: 'object', properties: { 'a/b~c': { not: {} } } });
    assert.deepEqual(result.ok ? null : result.pointer, '/properties/a~1b~0c/not');
  });

  test('tools: names must be usable and unique, parameters enforceable', () => {
    assert.deepEqual(checkToolsSupported([{ name: 'a' }, { name: 'b_2-x', parameters: { type: 'object' } }]), { ok: true });
    const bad = checkToolsSupported([{ name: 'ok' }, { name: 'has space' }]);
    assert.equal(bad.ok, false);
    assert.equal(bad.ok ? -1 : bad.toolIndex, 1);
    const twice = checkToolsSupported([{ name: 'a' }, { name: 'a' }]);
    assert.equal(twice.ok, false);
    const schema = checkToolsSupported([{ name: 'a', parameters: { type: 'object', properties: { x: { not: {} } } } }]);
    assert.deepEqual(schema.ok ? null : [schema.toolIndex, schema.keyword, schema.pointer], [0, 'not', '/properties/x/not']);
    // Arguments are an object, never null: OpenAPI's nullable is type ["object", "null"] written otherwise.
    for (const [parameters, keyword] of [[{ type: ['object', 'null'] }, 'type'], [{ type: 'object', nullable: true, properties: { a: { type: 'integer' } } }, 'nullable']] as const) {
      const refused = checkToolsSupported([{ name: 'f', parameters }]);
      assert.deepEqual(refused.ok ? null : [refused.toolIndex, refused.keyword, refused.pointer], [0, keyword, ''], JSON.stringify(parameters));
    }
    assert.deepEqual(checkToolsSupported([{ name: 'f', parameters: { type: 'object', nullable: false } }]), { ok: true });
  });

  test('the grammar of a generation: none, forced, auto', () => {
    const tools = [{ name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }];
    const free = constraintGrammar({ format: { type: 'text' }, tools: [], toolChoice: 'auto', parallelToolCalls: true }, PLAIN_TOOL_CALL_SYNTAX);
    assert.deepEqual(free, { grammar: null, layout: 'content' }, 'plain text needs no grammar');
    const none = constraintGrammar({ format: { type: 'text' }, tools, toolChoice: 'none', parallelToolCalls: true }, PLAIN_TOOL_CALL_SYNTAX);
    assert.equal(none.layout, 'content');
    assert.ok(none.grammar && !none.grammar.includes('get_weather'), 'no call can be written');
    const forced = constraintGrammar({ format: { type: 'text' }, tools, toolChoice: { name: 'get_weather' }, parallelToolCalls: false }, PLAIN_TOOL_CALL_SYNTAX);
    assert.equal(forced.layout, 'calls');
    assert.match(forced.grammar!, /^root ::= "<tool_call>\{\\"name\\": \\"" call-body$/m);
    const auto = constraintGrammar({ format: { type: 'json_object' }, tools, toolChoice: 'auto', parallelToolCalls: true }, PLAIN_TOOL_CALL_SYNTAX);
    assert.equal(auto.layout, 'content-or-calls');
    assert.throws(() => constraintGrammar({ format: { type: 'text' }, tools, toolChoice: { name: 'other' }, parallelToolCalls: true }, PLAIN_TOOL_CALL_SYNTAX), /not among the tools/);
  });

  describe('any JSON as a schema', () => {
    const keywords = fc.constantFrom('type', 'properties', 'required', 'items', 'prefixItems', 'enum', 'const', 'anyOf', 'oneOf', 'allOf', '$ref', '$defs',
      'minimum', 'maximum', 'exclusiveMinimum', 'multipleOf', 'minLength', 'maxLength', 'pattern', 'format', 'additionalProperties', 'minItems', 'maxItems',
      'uniqueItems', 'nullable', 'minProperties', 'maxProperties', 'a');
    const { tree } = fc.letrec((tie) => ({
      tree: fc.oneof({ maxDepth: 5 }, fc.jsonValue({ maxDepth: 2 }), fc.dictionary(keywords, tie('tree'), { maxKeys: 5 }), fc.array(tie('tree'), { maxLength: 3 }),
        fc.constantFrom('string', 'integer', 'object', 'number', 'array', 'boolean', '#', '#/$defs/a', '^a+[b-d]?$', '(x|y){2}', 3, -1, 0.5, 7, true, false, null)),
    }));

    test('is either supported or refused naming a keyword, never an exception', () => {
      fc.assert(fc.property(tree, (schema) => {
        const result = checkSchemaSupported(schema);
        if (!result.ok) assert.ok(typeof result.keyword === 'string' && /^(\/|$)/.test(result.pointer) && result.message.length > 0, JSON.stringify(result));
      }), { numRuns: 3000 });
      let deep: Record<string, unknown> = {};
      const root = deep;
      for (let level = 0; level < 10_000; level++) deep = (deep.items = {}) as Record<string, unknown>;
      assert.deepEqual((({ ok, keyword }) => ({ ok, keyword }))(checkSchemaSupported(root) as { ok: boolean; keyword?: string }), { ok: false, keyword: 'depth' });
    });

    test('every supported one gives a grammar llama.cpp parses', { timeout: 300_000 }, async () => {
      const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
      let parsed = 0;
      await fc.assert(fc.asyncProperty(tree, async (schema) => {
        if (!checkSchemaSupported(schema).ok) return;
        const tools = [{ name: 'f', parameters: { type: 'object', properties: { p: schema } } }];
        const { grammar } = constraintGrammar({ format: { type: 'json_schema', schema: schema as Record<string, unknown> }, tools, toolChoice: 'auto', parallelToolCalls: true }, PLAIN_TOOL_CALL_SYNTAX);
        await llama.createGrammar({ grammar: grammar! });
        parsed += 1;
      }), { numRuns: 1500 });
      assert.ok(parsed > 50, `${parsed} supported schemas parsed`);
      // Nested bounded repetitions, which llama.cpp's own {m,n} refuses past a threshold: the
      // grammar spells them out, so what checkSchemaSupported accepts also parses.
      for (const schema of [
        { type: 'string', pattern: '^((a{0,50}){0,50}){0,50}$' },
        { type: 'array', maxItems: 3000, items: { type: 'object', properties: { s: { type: 'string', minLength: 2500, maxLength: 5000 } } } },
      ]) {
        assert.deepEqual(checkSchemaSupported(schema), { ok: true });
        const { grammar } = constraintGrammar({ format: { type: 'json_schema', schema }, tools: [], toolChoice: 'auto', parallelToolCalls: true }, PLAIN_TOOL_CALL_SYNTAX);
        assert.ok(!/\{\d/.test(grammar!), 'no counted repetition is left to llama.cpp');
        await llama.createGrammar({ grammar: grammar! });
      }
    });
  });
});
