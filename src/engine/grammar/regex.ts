/**
 * JSON Schema `pattern` as GBNF: the strings generated are whole matches of the regular
 * expression, written as JSON string content (quotes, backslashes and control characters
 * escaped). A whole match also matches the unanchored search JSON Schema asks for, so every
 * generated string is valid. The subset: literals, `.`, classes with ranges and negation, the
 * escapes \d \w \s \D \W \S, groups, alternation, the quantifiers ? * + {n} {n,} {n,m}, and `^`
 * `$` at the ends (`^` also at the start of every top-level alternative). Backreferences, lookarounds, word boundaries and Unicode properties are not.
 */
import { complementRanges, normalizeRanges, rangesContain, type Ranges } from './ranges.js';
import { gbnfAlternatives, gbnfClass, gbnfLiteral, gbnfSequence, type GbnfRuleSet } from './gbnf.js';

export class UnsupportedPattern extends Error {}

export type { Ranges };

/** A set of characters: `ranges`, or everything but them. */
export interface CharSet {
  ranges: Ranges;
  negated: boolean;
}

const DIGIT: Ranges = [[0x30, 0x39]];
const WORD: Ranges = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
const SPACE: Ranges = [[0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x2028, 0x2029], [0xfeff, 0xfeff]];
const LINE_TERMINATORS: Ranges = [[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]];
/** Characters a JSON string must escape: written as their escape, or not generated at all. */
const MUST_ESCAPE: Ranges = [[0x00, 0x1f], [0x22, 0x22], [0x5c, 0x5c]];
const SHORT_ESCAPES = new Map<number, string>([[0x22, '\\"'], [0x5c, '\\\\'], [0x08, '\\b'], [0x09, '\\t'], [0x0a, '\\n'], [0x0c, '\\f'], [0x0d, '\\r']]);

/** The GBNF of single characters, made once each: a long pattern is mostly literal characters. */
const singleCharacters = new Map<number, string>();

/** The GBNF for one character of the set, as JSON string content. */
export function charSetToGbnf(set: CharSet): string {
  const [first] = set.ranges;
  if (!set.negated && set.ranges.length === 1 && first![0] === first![1]) {
    let gbnf = singleCharacters.get(first![0]);
    if (gbnf === undefined) singleCharacters.set(first![0], (gbnf = setToGbnf(set)));
    return gbnf;
  }
  return setToGbnf(set);
}

function setToGbnf(set: CharSet): string {
  const allowed = (codePoint: number) => rangesContain(set.ranges, codePoint) !== set.negated;
  const options: string[] = [];
  if (set.negated) {
    options.push(gbnfClass(normalizeRanges([...set.ranges, ...MUST_ESCAPE]), true));
  } else {
    const plain = normalizeRanges(set.ranges).flatMap(([from, to]): Ranges => {
      // The set minus the characters JSON must escape.
      return complementRanges(normalizeRanges([...complementRanges([[from, to]]), ...MUST_ESCAPE]));
    });
    if (plain.length > 0) options.push(gbnfClass(plain));
  }
  for (const [codePoint, escape] of SHORT_ESCAPES) if (allowed(codePoint)) options.push(gbnfLiteral(escape));
  // Other control characters a set names (\v, \0, \x01, ...) are written as \u00XX; a negated
  // set leaves them out (it has ordinary characters enough to write, and any of them matches).
  if (!set.negated) {
    for (let codePoint = 0; codePoint < 0x20; codePoint++) {
      if (!SHORT_ESCAPES.has(codePoint) && allowed(codePoint)) options.push(gbnfLiteral(`\\u${codePoint.toString(16).padStart(4, '0')}`));
    }
  }
  if (options.length === 0) throw new UnsupportedPattern('a character class that JSON strings cannot hold');
  return gbnfAlternatives(options);
}

function single(codePoint: number): CharSet {
  return { ranges: [[codePoint, codePoint]], negated: false };
}

/**
 * A regular expression as a tree: a character of a set, a sequence, alternatives, a repetition,
 * or a lookahead (only the automata of `automaton.ts` take those, and only at the start).
 */
export type RegexNode =
  | { kind: 'chars'; set: CharSet }
  | { kind: 'sequence'; items: RegexNode[] }
  | { kind: 'alternation'; options: RegexNode[] }
  | { kind: 'repeat'; item: RegexNode; min: number; max: number | null }
  | { kind: 'lookahead'; negated: boolean; body: RegexNode }
  /** `$`: the string ends here (nothing that takes a character may follow it). */
  | { kind: 'end' };

export interface ParsedPattern {
  node: RegexNode;
  /** The pattern begins with `^`: its matches begin where the string does. */
  startAnchored: boolean;
}

/**
 * Refuses a `$` that something taking a character may follow (`(a$)b`, `(a$)+`): no string
 * matches there, and the languages below would take it for an end in the middle.
 */
function assertEndsLast(node: RegexNode, followed: boolean): void {
  switch (node.kind) {
    case 'end':
      if (followed) throw new UnsupportedPattern('$ before the end');
      return;
    case 'chars':
      return;
    case 'lookahead':
      assertEndsLast(node.body, false);
      return;
    case 'alternation':
      for (const option of node.options) assertEndsLast(option, followed);
      return;
    case 'repeat':
      assertEndsLast(node.item, followed || node.max === null || node.max > 1);
      return;
    case 'sequence': {
      // From the last item back, so that a long sequence is walked once.
      let later = false;
      for (let index = node.items.length - 1; index >= 0; index--) {
        const item = node.items[index]!;
        assertEndsLast(item, followed || later);
        if (item.kind !== 'end' && item.kind !== 'lookahead') later = true;
      }
    }
  }
}

class RegexParser {
  private position = 0;
  private depth = 0;
  private alternatives = 0;
  private readonly chars: string[];

  constructor(source: string) {
    this.chars = [...source];
  }

  /**
   * Where the top-level alternatives begin, when there are several and each begins with `^`
   * (`^$|^(...)$`, as Zod writes `z.base64()`): the start is then anchored for all of them.
   */
  private anchoredBranchStarts(): number[] | null {
    const starts = [0];
    let depth = 0;
    for (let i = 0; i < this.chars.length; i++) {
      const char = this.chars[i]!;
      if (char === '\\') i++;
      else if (char === '[') {
        for (i++; i < this.chars.length && this.chars[i] !== ']'; i++) if (this.chars[i] === '\\') i++;
      } else if (char === '(') depth++;
      else if (char === ')') depth--;
      else if (char === '|' && depth === 0) starts.push(i + 1);
    }
    return starts.length > 1 && starts.every((start) => this.chars[start] === '^') ? starts : null;
  }

  parse(): ParsedPattern {
    const branches = this.anchoredBranchStarts();
    if (branches) {
      // Each `^` is dropped and the whole pattern is start-anchored, which means the same.
      for (const start of branches.reverse()) this.chars.splice(start, 1);
      return { ...this.parseFrom(0), startAnchored: true };
    }
    const startAnchored = this.chars[0] === '^';
    return { ...this.parseFrom(startAnchored ? 1 : 0), startAnchored };
  }

  private parseFrom(position: number): { node: RegexNode } {
    this.position = position;
    const node = this.alternation();
    if (this.position < this.chars.length) throw new UnsupportedPattern(`'${this.chars[this.position]}' at ${this.position}`);
    assertEndsLast(node, false);
    return { node };
  }

  private peek(): string | undefined {
    return this.chars[this.position];
  }

  private alternation(): RegexNode {
    const options = [this.sequence()];
    while (this.peek() === '|') {
      this.position++;
      if (++this.alternatives > MAX_PATTERN_ALTERNATIVES) throw new UnsupportedPattern(`more than ${MAX_PATTERN_ALTERNATIVES} alternatives`);
      options.push(this.sequence());
    }
    return options.length === 1 ? options[0]! : { kind: 'alternation', options };
  }

  private sequence(): RegexNode {
    const items: RegexNode[] = [];
    for (;;) {
      const char = this.peek();
      if (char === undefined || char === '|' || char === ')') break;
      if (char === '$') {
        this.position++;
        items.push({ kind: 'end' });
        continue;
      }
      if (char === '^') throw new UnsupportedPattern('^ after the start');
      items.push(this.quantified(this.atom()));
    }
    return items.length === 1 ? items[0]! : { kind: 'sequence', items };
  }

  private quantified(atom: RegexNode): RegexNode {
    const char = this.peek();
    let min = 1;
    let max: number | null = 1;
    if (char === '?') [min, max] = [0, 1];
    else if (char === '*') [min, max] = [0, null];
    else if (char === '+') [min, max] = [1, null];
    else if (char === '{') {
      // Only the quantifier's own characters are read: a slice to the end, for each `{` of a long
      // pattern, made parsing quadratic.
      let end = this.position + 1;
      while (end < this.chars.length && /[\d,]/.test(this.chars[end]!)) end++;
      const match = /^\{(\d+)(,(\d*))?\}/.exec(this.chars.slice(this.position, end + 1).join(''));
      if (!match) return atom;
      min = Number(match[1]);
      max = match[2] === undefined ? min : match[3] === '' ? null : Number(match[3]);
      if (max !== null && max < min) throw new UnsupportedPattern('a quantifier with max < min');
      if (min > MAX_PATTERN_REPETITION) throw new UnsupportedPattern('a quantifier above the repetition limit');
      if (max !== null && max > MAX_PATTERN_REPETITION) max = MAX_PATTERN_REPETITION;
      this.position += match[0].length - 1;
    } else {
      return atom;
    }
    if (atom.kind === 'lookahead' || atom.kind === 'end') throw new UnsupportedPattern('a quantified assertion');
    this.position++;
    if (this.peek() === '?') this.position++; // lazy: the language is the same
    return { kind: 'repeat', item: atom, min, max };
  }

  private atom(): RegexNode {
    const char = this.chars[this.position++]!;
    if (char === '(') {
      let lookahead: boolean | null = null;
      if (this.peek() === '?') {
        const rest = this.chars.slice(this.position, this.position + 3).join('');
        if (rest.startsWith('?:')) this.position += 2;
        else if (rest.startsWith('?=') || rest.startsWith('?!')) {
          lookahead = rest[1] === '!';
          this.position += 2;
        } else if (/^\?<[A-Za-z]/.test(rest)) {
          while (this.peek() !== undefined && this.peek() !== '>') this.position++;
          this.position++;
        } else throw new UnsupportedPattern('lookarounds');
      }
      if (++this.depth > MAX_GROUP_DEPTH) throw new UnsupportedPattern(`groups nested more than ${MAX_GROUP_DEPTH} deep`);
      const inner = this.alternation();
      this.depth--;
      if (this.chars[this.position++] !== ')') throw new UnsupportedPattern('an unclosed group');
      return lookahead === null ? inner : { kind: 'lookahead', negated: lookahead, body: inner };
    }
    if (char === '[') return { kind: 'chars', set: this.charClass() };
    if (char === '.') return { kind: 'chars', set: { ranges: LINE_TERMINATORS, negated: true } };
    if (char === '\\') {
      const set = this.escape(false);
      return { kind: 'chars', set: typeof set === 'number' ? single(set) : set };
    }
    if ('*+?{}'.includes(char)) {
      if (char === '{' || char === '}') return { kind: 'chars', set: single(char.codePointAt(0)!) };
      throw new UnsupportedPattern(`a quantifier without an atom`);
    }
    return { kind: 'chars', set: single(char.codePointAt(0)!) };
  }

  /** After a backslash: a code point, or a class escape. */
  private escape(inClass: boolean): number | CharSet {
    const char = this.chars[this.position++];
    if (char === undefined) throw new UnsupportedPattern('a trailing backslash');
    switch (char) {
      case 'd': return { ranges: DIGIT, negated: false };
      case 'D': return { ranges: DIGIT, negated: true };
      case 'w': return { ranges: WORD, negated: false };
      case 'W': return { ranges: WORD, negated: true };
      case 's': return { ranges: SPACE, negated: false };
      case 'S': return { ranges: SPACE, negated: true };
      case 'n': return 0x0a;
      case 'r': return 0x0d;
      case 't': return 0x09;
      case 'f': return 0x0c;
      case 'v': return 0x0b;
      case '0': return 0x00;
      case 'b': if (inClass) return 0x08; throw new UnsupportedPattern('word boundaries');
      case 'x': case 'u': {
        const braced = char === 'u' && this.peek() === '{';
        const match = braced
          ? /^\{([0-9a-fA-F]{1,6})\}/.exec(this.chars.slice(this.position).join(''))
          : new RegExp(`^[0-9a-fA-F]{${char === 'x' ? 2 : 4}}`).exec(this.chars.slice(this.position).join(''));
        if (!match) throw new UnsupportedPattern(`a malformed \\${char} escape`);
        this.position += match[0].length;
        return parseInt(match[1] ?? match[0], 16);
      }
      default:
        if (/[0-9BpPkc]/.test(char)) throw new UnsupportedPattern(`\\${char}`);
        return char.codePointAt(0)!;
    }
  }

  private charClass(): CharSet {
    const negated = this.peek() === '^';
    if (negated) this.position++;
    const ranges: Ranges = [];
    let first = true;
    for (;;) {
      const char = this.chars[this.position++];
      if (char === undefined) throw new UnsupportedPattern('an unclosed class');
      if (char === ']' && !first) break;
      first = false;
      let from: number | CharSet = char === '\\' ? this.escape(true) : char.codePointAt(0)!;
      if (typeof from !== 'number') {
        if (from.negated) throw new UnsupportedPattern('a negated escape inside a class');
        ranges.push(...from.ranges);
        continue;
      }
      if (this.peek() === '-' && this.chars[this.position + 1] !== ']' && this.chars[this.position + 1] !== undefined) {
        this.position++;
        const endChar = this.chars[this.position++]!;
        const to = endChar === '\\' ? this.escape(true) : endChar.codePointAt(0)!;
        if (typeof to !== 'number' || to < from) throw new UnsupportedPattern('a malformed range');
        ranges.push([from, to]);
        continue;
      }
      ranges.push([from, from]);
      from = 0;
    }
    return { ranges: normalizeRanges(ranges), negated };
  }
}

export const MAX_PATTERN_REPETITION = 10_000;
/**
 * How deep groups may nest. The parser and the automata walk the tree recursively, so a deeper
 * one (which JavaScript's own parser accepts) would exhaust the stack; 64 is also JSON's limit
 * here (LMSP 2), far beyond what patterns written by hand or by Zod use.
 */
export const MAX_GROUP_DEPTH = 64;
/**
 * `|` in one pattern at most, as enum values (json-schema.ts MAX_LITERAL_VALUES): llama.cpp steps
 * through each alternative it could be in, and 60,000 held the generation slot 45 s.
 */
export const MAX_PATTERN_ALTERNATIVES = 10_000;

/** Parses `pattern` into its tree; throws UnsupportedPattern for what the subset leaves out. */
export function parsePattern(pattern: string): ParsedPattern {
  try {
    new RegExp(pattern, 'u');
  } catch {
    throw new UnsupportedPattern('not a valid regular expression');
  }
  return new RegexParser(pattern).parse();
}

/** Whether a pattern needs the automata: it begins with lookaheads (`^(?!...)`). */
export function hasLookahead(node: RegexNode): boolean {
  switch (node.kind) {
    case 'chars': case 'end': return false;
    case 'lookahead': return true;
    case 'sequence': return node.items.some(hasLookahead);
    case 'alternation': return node.options.some(hasLookahead);
    case 'repeat': return hasLookahead(node.item);
  }
}

/** GBNF of JSON string content matching a tree wholly; a lookahead is not expressible here. */
export function nodeToGbnf(node: RegexNode, rules: GbnfRuleSet): string {
  switch (node.kind) {
    case 'chars': return charSetToGbnf(node.set);
    case 'sequence': return gbnfSequence(node.items.map((item) => nodeToGbnf(item, rules)));
    case 'alternation': return gbnfAlternatives(node.options.map((option) => nodeToGbnf(option, rules)));
    case 'repeat': return rules.repeat(nodeToGbnf(node.item, rules), node.min, node.max);
    // A whole match ends with the string: nothing to write.
    case 'end': return '""';
    case 'lookahead': throw new UnsupportedPattern('lookarounds');
  }
}

/** The GBNF of JSON string content that wholly matches `pattern`; throws UnsupportedPattern. */
export function regexToGbnf(pattern: string, rules: GbnfRuleSet): string {
  return nodeToGbnf(parsePattern(pattern).node, rules);
}
