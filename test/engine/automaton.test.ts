/**
 * The automata behind combined string constraints (LMSP 6.1): for patterns as Zod writes them
 * and for hand-made ones, an automaton accepts a string exactly when JavaScript's own RegExp
 * does (and the format's expression, and the lengths, where they take part), checked on random
 * strings and on random walks through the automaton itself (every string it can produce).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { accepts, intersectAll, MAX_WORK, patternConstraints, stepsOf, wholeMatches, withLength, trim, type Dfa } from '../../src/engine/grammar/automaton.js';
import { checkSchemaSupported } from '../../src/engine/grammar/constraint.js';
import { GbnfRuleSet } from '../../src/engine/grammar/gbnf.js';
import { JsonSchemaTranslator } from '../../src/engine/grammar/json-schema.js';
import { z } from 'zod';
import { formatPattern } from '../../src/engine/grammar/json-values.js';
import { parsePattern, UnsupportedPattern } from '../../src/engine/grammar/regex.js';

/** The patterns Zod 4 writes beside `format` (zod's toJSONSchema of z.email(), z.uuid(), ...). */
const ZOD = {
  'date-time': '^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]\\d|2[0-3]):[0-5]\\d(?::[0-5]\\d(?:\\.\\d+)?)?(?:Z))$',
  date: '^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))$',
  uuid: '^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$',
  email: "^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
  ipv4: '^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$',
  hostname: '^(?=.{1,253}\\.?$)[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[-0-9a-zA-Z]{0,61}[0-9a-zA-Z])?)*\\.?$',
} as const;

/** A string of length at most `max` drawn from the automaton by a random walk; null if it found no end. */
function walk(dfa: Dfa, random: () => number, max: number): string | null {
  let state = 0;
  let text = '';
  for (let step = 0; step <= max; step++) {
    const here = dfa.states[state]!;
    if (here.accepting && (here.edges.length === 0 || random() < 0.15)) return text;
    if (here.edges.length === 0) return null;
    const edge = here.edges[Math.floor(random() * here.edges.length)]!;
    const [from, to] = edge.ranges[Math.floor(random() * edge.ranges.length)]!;
    // Mostly printable ASCII where the range has it, so the strings stay readable when a check fails.
    const low = Math.max(from, 0x20);
    const high = Math.min(to, 0x7e);
    const codePoint = low <= high && random() < 0.9 ? low + Math.floor(random() * (high - low + 1)) : from + Math.floor(random() * Math.min(to - from + 1, 0x1000));
    text += String.fromCodePoint(codePoint);
    state = edge.to;
  }
  return null;
}

function seeded(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

function wholeFormat(format: string): RegExp {
  return new RegExp(`^(?:${formatPattern(format)!})$`, 'u');
}

describe('automata of string constraints (LMSP 6.1: format, pattern and lengths together)', () => {
  for (const [format, pattern] of Object.entries(ZOD)) {
    test(`${format} as Zod writes it: accepted exactly when both the format and the pattern match`, () => {
      const dfa = intersectAll([wholeMatches(parsePattern(formatPattern(format)!).node), ...patternConstraints(parsePattern(pattern), true)]);
      assert.ok(dfa, 'some value satisfies both');
      const zod = new RegExp(pattern, 'u');
      const own = wholeFormat(format);
      const random = seeded(format.length * 7919);
      let walked = 0;
      for (let i = 0; i < 400; i++) {
        const text = walk(dfa, random, 200);
        if (text === null) continue;
        walked += 1;
        assert.ok(zod.test(text) && own.test(text), `${JSON.stringify(text)} was produced but does not match`);
      }
      assert.ok(walked > 100, `${walked} walks ended`);
      const alphabet = fc.constantFrom(...'0123456789abcdefABCXYZ-.:@_+T Z\'x'.split(''));
      fc.assert(fc.property(fc.array(alphabet, { maxLength: 40 }).map((chars) => chars.join('')), (text) => {
        assert.equal(accepts(dfa, text), zod.test(text) && own.test(text), JSON.stringify(text));
      }), { numRuns: 2000 });
      for (const sample of ['2024-02-28T12:30:45Z', '2024-02-28', 'e3b0c442-98fc-4c14-9afb-f4c8996fb924', 'ab3@cd4.ef', '10.0.0.255', 'example.com']) {
        assert.equal(accepts(dfa, sample), zod.test(sample) && own.test(sample), sample);
      }
    });
  }

  test('a pattern alone is a whole match, beside a format a search; lookaheads at the start intersect', () => {
    const cases: Array<[pattern: string, search: boolean, alphabet: string]> = [
      ['^(?!x)(?!.*--)[a-z-]{2,6}$', false, 'xab-'],
      ['ab|c$', true, 'abcx'],
      ['^a(b|c$)', true, 'abcx'],
      ['[0-9]{2}', true, '01ab'],
      ['^(?=.{0,4}$)(a|b)*', true, 'abc'],
    ];
    for (const [pattern, search, letters] of cases) {
      const dfa = intersectAll(patternConstraints(parsePattern(pattern), search))!;
      // The whole-match cases are anchored at both ends, where a whole match and a search agree.
      const js = new RegExp(pattern, 'u');
      fc.assert(fc.property(fc.array(fc.constantFrom(...letters.split('')), { maxLength: 9 }).map((chars) => chars.join('')), (text) => {
        assert.equal(accepts(dfa, text), js.test(text), `${pattern} on ${JSON.stringify(text)}`);
      }), { numRuns: 1500 });
    }
  });

  test('lengths: exactly the accepted strings of min to max code points, and none when none fit', () => {
    const letters = intersectAll(patternConstraints(parsePattern('^[a-c]+$'), false))!;
    const bounded = trim(withLength(letters, 2, 4))!;
    fc.assert(fc.property(fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'é'), { maxLength: 7 }).map((chars) => chars.join('')), (text) => {
      assert.equal(accepts(bounded, text), /^[a-c]{2,4}$/u.test(text), JSON.stringify(text));
    }), { numRuns: 1000 });
    const uuid = wholeMatches(parsePattern(formatPattern('uuid')!).node);
    assert.equal(trim(withLength(uuid, 0, 30)), null, 'a uuid has 36 characters');
    assert.equal(withLength(uuid, 0, 100), uuid, 'a bound every value meets changes nothing');
  });

  test('what the automata refuse: a $ in the middle, lookaheads elsewhere than at the start, sizes past the bound', () => {
    assert.throws(() => parsePattern('(a$)b'), UnsupportedPattern);
    assert.throws(() => parsePattern('(a$)+'), UnsupportedPattern);
    assert.throws(() => patternConstraints(parsePattern('^a(?!b)c$'), false), UnsupportedPattern);
    assert.throws(() => patternConstraints(parsePattern('(?!b)c'), true), UnsupportedPattern, 'a lookahead needs ^');
    // An a 20 characters before the end: a deterministic automaton needs 2^20 states.
    assert.throws(() => patternConstraints(parsePattern('^(a|b)*a(a|b){20}$'), false), /too large/);
  });

  test('bounded work: hostile patterns are refused at a fixed count of steps; Zod\'s formats use a fraction of it, equal fields once', () => {
    const wide = Array.from({ length: 3000 }, (_, i) => String.fromCodePoint(0x4e00 + i * 2)).join('');
    const hostile: Record<string, unknown> = {
      'an a 13 characters before the end': { type: 'string', pattern: '^(?!z)(a|b)*a(a|b){13}$' },
      'a class of 3,000 characters, 200 times': { type: 'string', pattern: `^(?!z)[${wide}]{1,200}$` },
      '200 alternatives, 60 times': { type: 'string', pattern: `^(?!z)(${Array.from({ length: 200 }, (_, i) => String.fromCodePoint(0x4e00 + i * 3)).join('|')}){1,60}$` },
      'a long lookahead under a complement': { type: 'string', pattern: '^(?=.{1,9000}$)(?!.*(ab|cd|ef|gh).*(ij|kl))[a-z]+$' },
      'a length to count past the bound': { type: 'string', pattern: '^[a-z]{1,3000}$', minLength: 1, maxLength: 4000 },
    };
    for (const [name, schema] of Object.entries(hostile)) {
      const result = checkSchemaSupported(schema);
      assert.equal(result.ok, false, name);
      if (!result.ok) assert.match(result.message, /too large to enforce/, name);
    }
    const translate = (schema: unknown) => () => new JsonSchemaTranslator(new GbnfRuleSet(1 << 30, () => {
      throw new Error('too large');
    })).translate(schema);
    const properties = (z.toJSONSchema(z.object({
      email: z.email().max(254), uuid: z.uuid(), when: z.iso.datetime(), day: z.iso.date(), ip: z.ipv4(), host: z.hostname(), short: z.email().max(30),
    })) as { properties: Record<string, unknown> }).properties;
    for (const [name, schema] of Object.entries(properties)) {
      const steps = stepsOf(translate(schema));
      assert.ok(steps < MAX_WORK / 2, `${name}: ${steps} steps`);
      assert.equal(stepsOf(translate(schema)), steps, `${name}: counted, so the same every time`);
    }
    const one = stepsOf(translate(properties.email));
    const hundred = stepsOf(translate({ type: 'object', properties: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`e${i}`, properties.email])) }));
    assert.ok(hundred < one * 1.5, `100 equal fields: ${hundred} steps against ${one} for one`);
  });
});
