/**
 * Decimal numbers as patterns: integers in a range (JSON Schema minimum, maximum and their
 * exclusive forms), and numbers with a fraction inside bounds. A pattern renders to GBNF for
 * generation and to a RegExp, so tests can check the language exactly against a brute force.
 *
 * Generated numbers have at most MAX_INTEGER_DIGITS integer digits and MAX_FRACTION_DIGITS
 * fraction digits and no exponent, and a model cannot run a number on forever. Integers parse to
 * the value they spell (well inside a double's exact range); a bounded number with a fraction has
 * at most 15 digits in all, so that it parses to a double strictly between its integer neighbours.
 */
import { gbnfAlternatives, gbnfClass, gbnfLiteral, gbnfSequence, type GbnfRuleSet } from './gbnf.js';

export const MAX_INTEGER_DIGITS = 15;
export const MAX_FRACTION_DIGITS = 15;
/** Digits of a bounded number with a fraction, in all (DBL_DIG: what a double keeps exactly). */
const MAX_SIGNIFICANT_DIGITS = 15;
/** The largest integer a generated number can spell. */
export const MAX_GENERATED_INTEGER = 10n ** BigInt(MAX_INTEGER_DIGITS) - 1n;

export type Pattern =
  | { kind: 'literal'; text: string }
  | { kind: 'digits'; from: number; to: number }
  | { kind: 'sequence'; parts: Pattern[] }
  | { kind: 'choice'; options: Pattern[] }
  | { kind: 'repeat'; pattern: Pattern; min: number; max: number };

const literal = (text: string): Pattern => ({ kind: 'literal', text });
const digits = (from: number, to: number): Pattern => ({ kind: 'digits', from, to });
const sequence = (...parts: Pattern[]): Pattern => ({ kind: 'sequence', parts });
const choice = (options: Pattern[]): Pattern => (options.length === 1 ? options[0]! : { kind: 'choice', options });
const repeat = (pattern: Pattern, min: number, max: number): Pattern => ({ kind: 'repeat', pattern, min, max });

export function patternToGbnf(pattern: Pattern, rules: GbnfRuleSet): string {
  switch (pattern.kind) {
    case 'literal': return gbnfLiteral(pattern.text);
    case 'digits': return gbnfClass([[0x30 + pattern.from, 0x30 + pattern.to]]);
    case 'sequence': return gbnfSequence(pattern.parts.map((part) => patternToGbnf(part, rules)));
    case 'choice': return gbnfAlternatives(pattern.options.map((option) => patternToGbnf(option, rules)));
    case 'repeat': return rules.repeat(patternToGbnf(pattern.pattern, rules), pattern.min, pattern.max);
  }
}

export function patternToRegExpSource(pattern: Pattern): string {
  switch (pattern.kind) {
    case 'literal': return pattern.text.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
    case 'digits': return `[${pattern.from}-${pattern.to}]`;
    case 'sequence': return pattern.parts.map(patternToRegExpSource).join('');
    case 'choice': return `(?:${pattern.options.map(patternToRegExpSource).join('|')})`;
    case 'repeat': return `(?:${patternToRegExpSource(pattern.pattern)}){${pattern.min},${pattern.max}}`;
  }
}

/** Equal-length digit strings from `low` to `high` (low <= high). */
function sameLength(low: string, high: string): Pattern {
  if (low === high) return literal(low);
  let common = 0;
  while (low[common] === high[common]) common++;
  const prefix = low.slice(0, common);
  const lowDigit = Number(low[common]);
  const highDigit = Number(high[common]);
  const lowRest = low.slice(common + 1);
  const highRest = high.slice(common + 1);
  const width = lowRest.length;
  const anyRest = (): Pattern[] => (width === 0 ? [] : [repeat(digits(0, 9), width, width)]);
  const options: Pattern[] = [];
  if (/^0*$/.test(lowRest) && /^9*$/.test(highRest)) {
    options.push(sequence(digits(lowDigit, highDigit), ...anyRest()));
  } else {
    let from = lowDigit;
    if (!/^0*$/.test(lowRest)) {
      options.push(sequence(literal(String(lowDigit)), sameLength(lowRest, '9'.repeat(width))));
      from += 1;
    }
    let to = highDigit;
    const highOption = /^9*$/.test(highRest) ? null : sequence(literal(String(highDigit)), sameLength('0'.repeat(width), highRest));
    if (highOption) to -= 1;
    if (from <= to) options.push(sequence(digits(from, to), ...anyRest()));
    if (highOption) options.push(highOption);
  }
  const body = choice(options);
  return prefix ? sequence(literal(prefix), body) : body;
}

/** Non-negative integers from `low` to `high`, written without leading zeros. */
function nonNegativeRange(low: bigint, high: bigint): Pattern | null {
  if (low > high) return null;
  const options: Pattern[] = [];
  for (let length = String(low).length; length <= String(high).length; length++) {
    const first = length === 1 ? 0n : 10n ** BigInt(length - 1);
    const last = 10n ** BigInt(length) - 1n;
    const from = low > first ? low : first;
    const to = high < last ? high : last;
    if (from <= to) options.push(sameLength(String(from), String(to)));
  }
  return choice(options);
}

/** Integers from `low` to `high` inclusive (null bounds: as far as generated numbers go). */
export function integerRange(low: bigint | null, high: bigint | null): Pattern | null {
  const from = low === null || low < -MAX_GENERATED_INTEGER ? -MAX_GENERATED_INTEGER : low;
  const to = high === null || high > MAX_GENERATED_INTEGER ? MAX_GENERATED_INTEGER : high;
  if (from > to) return null;
  const options: Pattern[] = [];
  if (from < 0n) {
    const negatives = nonNegativeRange(to < -1n ? -to : 1n, -from);
    if (negatives) options.push(sequence(literal('-'), negatives));
  }
  const positives = nonNegativeRange(from > 0n ? from : 0n, to);
  if (positives && to >= 0n) options.push(positives);
  return options.length === 0 ? null : choice(options);
}

/** A fraction of 1 to `length` digits that does not end in 0, so `k.f` never equals the integer k. */
function fraction(length: number): Pattern {
  return sequence(literal('.'), repeat(digits(0, 9), 0, length - 1), digits(1, 9));
}

/**
 * "k.f" for k from `low` to `high`, with at most MAX_SIGNIFICANT_DIGITS digits in all: a double
 * tells apart every two decimals of 15 significant digits, and reads each as the nearest double,
 * so such a k.f parses strictly between k and k + 1 (99.999999999999999 parses to 100, which an
 * exclusiveMaximum of 100 forbids). So the longer k, the shorter f; a k of 15 digits has none.
 */
function withFraction(low: bigint, high: bigint): Pattern | null {
  const options: Pattern[] = [];
  for (let length = 1; length < MAX_SIGNIFICANT_DIGITS; length++) {
    const first = length === 1 ? 0n : 10n ** BigInt(length - 1);
    const last = 10n ** BigInt(length) - 1n;
    const whole = nonNegativeRange(low > first ? low : first, high < last ? high : last);
    if (whole) options.push(sequence(whole, fraction(Math.min(MAX_FRACTION_DIGITS, MAX_SIGNIFICANT_DIGITS - length))));
  }
  return options.length === 0 ? null : choice(options);
}

export interface NumberBounds {
  minimum: number | null;
  maximum: number | null;
  exclusiveMinimum: boolean;
  exclusiveMaximum: boolean;
}

function ceilBig(value: number): bigint {
  return BigInt(Math.ceil(value));
}
function floorBig(value: number): bigint {
  return BigInt(Math.floor(value));
}

/** Integers within bounds, or null when there is none. */
export function boundedInteger(bounds: NumberBounds): Pattern | null {
  const clamp = (value: number) => Math.max(-1e16, Math.min(1e16, value));
  let low: bigint | null = null;
  let high: bigint | null = null;
  if (bounds.minimum !== null) {
    const minimum = clamp(bounds.minimum);
    low = bounds.exclusiveMinimum ? floorBig(minimum) + 1n : ceilBig(minimum);
  }
  if (bounds.maximum !== null) {
    const maximum = clamp(bounds.maximum);
    high = bounds.exclusiveMaximum ? ceilBig(maximum) - 1n : floorBig(maximum);
  }
  return integerRange(low, high);
}

/**
 * Numbers within bounds: the integers inside, and k.f (0 < f < 1) for every integer part k
 * whose open interval (k, k + 1) lies inside, on either side of zero. This is a subset of the
 * valid numbers (it leaves out, say, 1.7 under minimum 1.5), which is all generation needs.
 */
export function boundedNumber(bounds: NumberBounds): Pattern | null {
  const options: Pattern[] = [];
  const integers = boundedInteger(bounds);
  if (integers) options.push(integers);
  const clamp = (value: number) => Math.max(-1e16, Math.min(1e16, value));
  const low = bounds.minimum === null ? null : clamp(bounds.minimum);
  const high = bounds.maximum === null ? null : clamp(bounds.maximum);
  // k >= 0 spelled "k.f": needs low <= k and k + 1 <= high.
  const positiveFrom = low === null || low < 0 ? 0n : ceilBig(low);
  const positiveTo = high === null ? MAX_GENERATED_INTEGER : floorBig(high) - 1n;
  const positives = positiveTo >= 0n ? withFraction(positiveFrom, positiveTo < MAX_GENERATED_INTEGER ? positiveTo : MAX_GENERATED_INTEGER) : null;
  if (positives) options.push(positives);
  // "-m.f" lies in (-(m + 1), -m): needs low <= -(m + 1) and -m <= high.
  const negativeFrom = high === null || high > 0 ? 0n : ceilBig(-high);
  const negativeTo = low === null ? MAX_GENERATED_INTEGER : floorBig(-low) - 1n;
  const negatives = negativeTo >= 0n ? withFraction(negativeFrom, negativeTo < MAX_GENERATED_INTEGER ? negativeTo : MAX_GENERATED_INTEGER) : null;
  if (negatives) options.push(sequence(literal('-'), negatives));
  return options.length === 0 ? null : choice(options);
}

/**
 * Multiples of `step` (a positive integer) with at most MAX_INTEGER_DIGITS digits (the negative
 * ones and 0 unless `signs` leaves them out), by the
 * automaton of remainders: a state is the remainder and length of the digits so far, and only
 * states from which a multiple can still be completed are kept.
 */
export function multiplesOf(step: number, rules: GbnfRuleSet, signs: { negative: boolean; zero: boolean } = { negative: true, zero: true }): string {
  const live: boolean[][] = [];
  for (let length = MAX_INTEGER_DIGITS; length >= 1; length--) {
    live[length] = [];
    for (let remainder = 0; remainder < step; remainder++) {
      let alive = remainder === 0;
      for (let digit = 0; digit <= 9 && !alive && length < MAX_INTEGER_DIGITS; digit++) alive = live[length + 1]![(remainder * 10 + digit) % step]!;
      live[length]![remainder] = alive;
    }
  }
  const names = new Map<string, string>();
  const state = (remainder: number, length: number): string => {
    const key = `${remainder}:${length}`;
    let name = names.get(key);
    if (name) return name;
    name = rules.reserve(`multiple-of-${step}-state`);
    names.set(key, name);
    const options: string[] = remainder === 0 ? ['""'] : [];
    if (length < MAX_INTEGER_DIGITS) {
      for (let digit = 0; digit <= 9; digit++) {
        const next = (remainder * 10 + digit) % step;
        if (live[length + 1]![next]) options.push(`"${digit}" ${state(next, length + 1)}`);
      }
    }
    rules.set(name, options.join(' | '));
    return name;
  };
  const firsts: string[] = [];
  for (let digit = 1; digit <= 9; digit++) {
    if (live[1]![digit % step]) firsts.push(`"${digit}" ${state(digit % step, 1)}`);
  }
  const nonZero = `${signs.negative ? '"-"? ' : ''}(${firsts.join(' | ')})`;
  return signs.zero ? `("0" | ${nonZero})` : `(${nonZero})`;
}
