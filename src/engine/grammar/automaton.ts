/**
 * Finite automata over code points, for string constraints that are regular but that no single
 * GBNF expression states: a `format` together with a `pattern`, either with `minLength` or
 * `maxLength`, and patterns that begin with lookaheads (`^(?!\.)...`, as Zod writes e-mail
 * addresses). Each constraint becomes a deterministic automaton; their product accepts exactly
 * the strings that satisfy all of them, and it is written out as GBNF, one rule per state.
 *
 * Sizes are bounded (`MAX_STATES`): a combination whose automaton would be larger is refused,
 * as any schema the grammar cannot hold.
 */
import { gbnfAlternatives, group, type GbnfRuleSet } from './gbnf.js';
import { charSetToGbnf, UnsupportedPattern, type CharSet, type Ranges, type RegexNode } from './regex.js';

const MAX_CODE_POINT = 0x10ffff;
/** States of any one automaton, deterministic or not. */
export const MAX_STATES = 20_000;

/** Every code point. */
const EVERYTHING: Ranges = [[0, MAX_CODE_POINT]];
/**
 * What a string of the grammar may hold: no control characters but the short escapes JSON has
 * (`\t`, `\n`, ...), no lone surrogates. A generated string stays within it.
 */
export const WRITABLE: Ranges = [[0x08, 0x0a], [0x0c, 0x0d], [0x20, 0xd7ff], [0xe000, MAX_CODE_POINT]];
/** The characters an unanchored side of a pattern may add: printable ones. */
const PRINTABLE: Ranges = [[0x20, 0xd7ff], [0xe000, MAX_CODE_POINT]];

function tooLarge(): never {
  throw new UnsupportedPattern('a combination too large to enforce');
}

// Ranges: sorted, disjoint, inclusive [from, to] pairs.

function normalize(ranges: Ranges): Ranges {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: Ranges = [];
  for (const [from, to] of sorted) {
    const last = out.at(-1);
    if (last && from <= last[1] + 1) last[1] = Math.max(last[1], to);
    else out.push([from, to]);
  }
  return out;
}

function complementOf(ranges: Ranges): Ranges {
  const out: Ranges = [];
  let next = 0;
  for (const [from, to] of normalize(ranges)) {
    if (from > next) out.push([next, from - 1]);
    next = to + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}

function intersectRanges(a: Ranges, b: Ranges): Ranges {
  const out: Ranges = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const from = Math.max(a[i]![0], b[j]![0]);
    const to = Math.min(a[i]![1], b[j]![1]);
    if (from <= to) out.push([from, to]);
    if (a[i]![1] < b[j]![1]) i++;
    else j++;
  }
  return out;
}

function rangesOf(set: CharSet): Ranges {
  return set.negated ? complementOf(set.ranges) : normalize(set.ranges);
}

// Non-deterministic automata (Thompson's construction).

interface NfaState {
  epsilon: number[];
  edges: Array<{ ranges: Ranges; to: number }>;
}

class Nfa {
  readonly states: NfaState[] = [];
  /** Where `$` leads: the end of the string, past anything that may follow the pattern. */
  readonly accept: number;

  constructor() {
    this.accept = this.add();
  }

  add(): number {
    if (this.states.length >= MAX_STATES * 4) tooLarge();
    this.states.push({ epsilon: [], edges: [] });
    return this.states.length - 1;
  }

  /** A fragment for `node`, from `start` to a new end state. */
  build(node: RegexNode, start: number): number {
    switch (node.kind) {
      case 'chars': {
        const end = this.add();
        const ranges = rangesOf(node.set);
        if (ranges.length > 0) this.states[start]!.edges.push({ ranges, to: end });
        return end;
      }
      case 'sequence':
        return node.items.reduce((at, item) => this.build(item, at), start);
      case 'alternation': {
        const end = this.add();
        for (const option of node.options) {
          const from = this.add();
          this.states[start]!.epsilon.push(from);
          this.states[this.build(option, from)]!.epsilon.push(end);
        }
        return end;
      }
      case 'repeat': {
        let at = start;
        for (let i = 0; i < node.min; i++) at = this.build(node.item, at);
        if (node.max === null) {
          // A loop: from `at`, the item any number of times.
          const loop = this.add();
          this.states[at]!.epsilon.push(loop);
          const end = this.add();
          this.states[loop]!.epsilon.push(end);
          this.states[this.build(node.item, loop)]!.epsilon.push(loop);
          return end;
        }
        const end = this.add();
        for (let i = node.min; i < node.max; i++) {
          this.states[at]!.epsilon.push(end);
          at = this.build(node.item, at);
        }
        this.states[at]!.epsilon.push(end);
        return end;
      }
      case 'end':
        // The string ends here: straight to acceptance; nothing continues from this path.
        this.states[start]!.epsilon.push(this.accept);
        return this.add();
      case 'lookahead':
        throw new UnsupportedPattern('lookarounds other than at the start');
    }
  }

  /** A state that takes any number of `ranges` and goes on to `next`. */
  any(ranges: Ranges, next: number): number {
    const loop = this.add();
    this.states[loop]!.edges.push({ ranges, to: loop });
    this.states[loop]!.epsilon.push(next);
    return loop;
  }
}

// Deterministic automata: edges of a state have disjoint ranges; state 0 is the start.

export interface DfaState {
  accepting: boolean;
  edges: Array<{ ranges: Ranges; to: number }>;
}

export interface Dfa {
  states: DfaState[];
}

/** `ranges` over the target of each code point: adjacent and equal targets merged into edges. */
function edgesFromIntervals(intervals: Array<{ from: number; to: number; target: number }>): DfaState['edges'] {
  const byTarget = new Map<number, Ranges>();
  for (const { from, to, target } of intervals) {
    const list = byTarget.get(target) ?? [];
    list.push([from, to]);
    byTarget.set(target, list);
  }
  return [...byTarget].map(([to, ranges]) => ({ ranges: normalize(ranges), to }));
}

/** The boundaries at which the edges of a state may change target, in order. */
function boundaries(rangeLists: Ranges[]): number[] {
  const points = new Set<number>();
  for (const ranges of rangeLists) for (const [from, to] of ranges) points.add(from).add(to + 1);
  return [...points].sort((a, b) => a - b);
}

function determinize(nfa: Nfa, start: number, accept: number): Dfa {
  const closure = (seeds: number[]): number[] => {
    const seen = new Set(seeds);
    const stack = [...seeds];
    while (stack.length > 0) {
      for (const next of nfa.states[stack.pop()!]!.epsilon) {
        if (!seen.has(next)) {
          seen.add(next);
          stack.push(next);
        }
      }
    }
    return [...seen].sort((a, b) => a - b);
  };
  const sets: number[][] = [];
  const index = new Map<string, number>();
  const states: DfaState[] = [];
  const stateOf = (set: number[]): number => {
    const key = set.join(',');
    let id = index.get(key);
    if (id === undefined) {
      if (states.length >= MAX_STATES) tooLarge();
      id = states.length;
      index.set(key, id);
      sets.push(set);
      states.push({ accepting: set.includes(accept), edges: [] });
    }
    return id;
  };
  stateOf(closure([start]));
  for (let id = 0; id < states.length; id++) {
    const edges = sets[id]!.flatMap((member) => nfa.states[member]!.edges);
    const points = boundaries(edges.map((edge) => edge.ranges));
    const intervals: Array<{ from: number; to: number; target: number }> = [];
    for (let k = 0; k + 1 < points.length; k++) {
      const from = points[k]!;
      const to = points[k + 1]! - 1;
      const targets = edges.filter((edge) => edge.ranges.some(([a, b]) => a <= from && to <= b)).map((edge) => edge.to);
      if (targets.length > 0) intervals.push({ from, to, target: stateOf(closure(targets)) });
    }
    states[id]!.edges = edgesFromIntervals(intervals);
  }
  return { states };
}

/**
 * The automaton of the strings made of `node` with, where given, any characters of `before`
 * ahead of it and of `after` behind it (a `$` in `node` leaves no room behind).
 */
function languageOf(node: RegexNode, around: { before?: Ranges; after?: Ranges } = {}): Dfa {
  const nfa = new Nfa();
  const start = nfa.add();
  let begin = start;
  if (around.before) {
    begin = nfa.add();
    nfa.states[start]!.epsilon.push(nfa.any(around.before, begin));
  }
  const end = nfa.build(node, begin);
  nfa.states[end]!.epsilon.push(around.after ? nfa.any(around.after, nfa.accept) : nfa.accept);
  return determinize(nfa, start, nfa.accept);
}

/** The automaton of the strings that wholly match `node`. */
export function wholeMatches(node: RegexNode): Dfa {
  return languageOf(node);
}

/** The strings made of the given characters only, any number of them. */
export function stringsOf(ranges: Ranges): Dfa {
  return { states: [{ accepting: true, edges: [{ ranges: normalize(ranges), to: 0 }] }] };
}

/** The strings both automata accept. */
export function intersect(a: Dfa, b: Dfa): Dfa {
  const index = new Map<string, number>();
  const pairs: Array<[number, number]> = [];
  const states: DfaState[] = [];
  const stateOf = (x: number, y: number): number => {
    const key = `${x},${y}`;
    let id = index.get(key);
    if (id === undefined) {
      if (states.length >= MAX_STATES) tooLarge();
      id = states.length;
      index.set(key, id);
      pairs.push([x, y]);
      states.push({ accepting: a.states[x]!.accepting && b.states[y]!.accepting, edges: [] });
    }
    return id;
  };
  stateOf(0, 0);
  for (let id = 0; id < states.length; id++) {
    const [x, y] = pairs[id]!;
    const edges: DfaState['edges'] = [];
    for (const ea of a.states[x]!.edges) {
      for (const eb of b.states[y]!.edges) {
        const ranges = intersectRanges(ea.ranges, eb.ranges);
        if (ranges.length > 0) edges.push({ ranges, to: stateOf(ea.to, eb.to) });
      }
    }
    states[id]!.edges = edges;
  }
  return { states };
}

/** The strings the automaton does not accept (over every code point). */
export function complement(dfa: Dfa): Dfa {
  const sink = dfa.states.length;
  const states: DfaState[] = dfa.states.map((state) => {
    const covered = normalize(state.edges.flatMap((edge) => edge.ranges));
    const rest = complementOf(covered);
    return { accepting: !state.accepting, edges: [...state.edges, ...(rest.length > 0 ? [{ ranges: rest, to: sink }] : [])] };
  });
  states.push({ accepting: true, edges: [{ ranges: EVERYTHING, to: sink }] });
  return { states };
}

/**
 * The automaton without the states that cannot be reached or cannot reach an end; null when
 * it accepts nothing at all.
 */
export function trim(dfa: Dfa): Dfa | null {
  const reachable = new Set<number>([0]);
  for (const stack = [0]; stack.length > 0;) {
    for (const edge of dfa.states[stack.pop()!]!.edges) {
      if (!reachable.has(edge.to)) {
        reachable.add(edge.to);
        stack.push(edge.to);
      }
    }
  }
  const incoming = new Map<number, number[]>();
  dfa.states.forEach((state, from) => {
    for (const edge of state.edges) incoming.set(edge.to, [...(incoming.get(edge.to) ?? []), from]);
  });
  const useful = new Set<number>();
  const stack = dfa.states.flatMap((state, id) => (state.accepting && reachable.has(id) ? [id] : []));
  for (const id of stack) useful.add(id);
  while (stack.length > 0) {
    for (const from of incoming.get(stack.pop()!) ?? []) {
      if (reachable.has(from) && !useful.has(from)) {
        useful.add(from);
        stack.push(from);
      }
    }
  }
  if (!useful.has(0)) return null;
  const kept = [...useful].sort((a, b) => a - b);
  const renumber = new Map(kept.map((old, id) => [old, id]));
  return {
    states: kept.map((old) => {
      const state = dfa.states[old]!;
      return { accepting: state.accepting, edges: state.edges.filter((edge) => renumber.has(edge.to)).map((edge) => ({ ranges: edge.ranges, to: renumber.get(edge.to)! })) };
    }),
  };
}

/** The smallest automaton of the same strings (Moore's partition refinement). */
export function minimize(dfa: Dfa): Dfa {
  // Each state's ranges in order, with their target: the signature of a round reads them as they are.
  const spans = dfa.states.map((state) => state.edges
    .flatMap((edge) => edge.ranges.map(([from, to]) => [from, to, edge.to] as const))
    .sort((x, y) => x[0] - y[0]));
  let classes: number[] = dfa.states.map((state) => (state.accepting ? 1 : 0));
  for (let count = new Set(classes).size; ;) {
    const numbering = new Map<string, number>();
    // The start state's class is numbered first, so that it stays state 0.
    const next = spans.map((list, id) => {
      let signature = String(classes[id]);
      let last: { to: number; target: number } | null = null;
      for (const [from, to, target] of list) {
        const targetClass = classes[target]!;
        if (last && last.target === targetClass && last.to + 1 === from) {
          last.to = to;
          continue;
        }
        if (last) signature += `-${last.to}>${last.target}`;
        signature += `,${from}`;
        last = { to, target: targetClass };
      }
      if (last) signature += `-${last.to}>${last.target}`;
      let number = numbering.get(signature);
      if (number === undefined) {
        number = numbering.size;
        numbering.set(signature, number);
      }
      return number;
    });
    classes = next;
    if (numbering.size === count) break;
    count = numbering.size;
  }
  const size = new Set(classes).size;
  const states: DfaState[] = Array.from({ length: size }, () => ({ accepting: false, edges: [] }));
  const done = new Set<number>();
  dfa.states.forEach((state, id) => {
    const target = classes[id]!;
    if (done.has(target)) return;
    done.add(target);
    states[target] = { accepting: state.accepting, edges: mergeEdges(state.edges.map((edge) => ({ ranges: edge.ranges, to: classes[edge.to]! }))) };
  });
  return { states };
}

function mergeEdges(edges: DfaState['edges']): DfaState['edges'] {
  const byTarget = new Map<number, Ranges>();
  for (const edge of edges) byTarget.set(edge.to, [...(byTarget.get(edge.to) ?? []), ...edge.ranges]);
  return [...byTarget].map(([to, ranges]) => ({ ranges: normalize(ranges), to }));
}

/** Shortest and longest accepted lengths of a trimmed automaton (longest null: unbounded). */
function lengthRange(dfa: Dfa): { shortest: number; longest: number | null } {
  const depth = new Map<number, number>([[0, 0]]);
  const queue = [0];
  let shortest = Infinity;
  for (let head = 0; head < queue.length; head++) {
    const id = queue[head]!;
    if (dfa.states[id]!.accepting) shortest = Math.min(shortest, depth.get(id)!);
    for (const edge of dfa.states[id]!.edges) {
      if (!depth.has(edge.to)) {
        depth.set(edge.to, depth.get(id)! + 1);
        queue.push(edge.to);
      }
    }
  }
  // Longest path in the graph of a trimmed automaton, unbounded when it has a cycle.
  const longestFrom = new Map<number, number>();
  const onPath = new Set<number>();
  const visit = (id: number): number => {
    if (onPath.has(id)) throw cycle;
    const known = longestFrom.get(id);
    if (known !== undefined) return known;
    onPath.add(id);
    let best = dfa.states[id]!.accepting ? 0 : -Infinity;
    for (const edge of dfa.states[id]!.edges) best = Math.max(best, 1 + visit(edge.to));
    onPath.delete(id);
    longestFrom.set(id, best);
    return best;
  };
  const cycle = new Error('cycle');
  try {
    return { shortest, longest: visit(0) };
  } catch (error) {
    if (error === cycle) return { shortest, longest: null };
    throw error;
  }
}

/** States a length bound may multiply an automaton to: each becomes a rule of the grammar. */
const LENGTH_STATES = 4096;

/**
 * The strings of a trimmed automaton with `min` to `max` code points (max null: no bound). A
 * `max` too large to count up to within LENGTH_STATES is lowered to what fits: shorter strings
 * are as valid.
 */
export function withLength(dfa: Dfa, min: number, max: number | null): Dfa {
  const { shortest, longest } = lengthRange(dfa);
  if (shortest >= min && (max === null || (longest !== null && longest <= max))) return dfa;
  const fits = Math.floor(LENGTH_STATES / dfa.states.length) - 1;
  if (min > fits) tooLarge();
  if (max !== null) max = Math.min(max, fits);
  // Count the characters beside each state; past `min` without a `max` the count stops mattering.
  const cap = max ?? min;
  const index = new Map<string, number>();
  const pairs: Array<[number, number]> = [];
  const states: DfaState[] = [];
  const stateOf = (state: number, count: number): number => {
    const key = `${state},${count}`;
    let id = index.get(key);
    if (id === undefined) {
      if (states.length >= MAX_STATES) tooLarge();
      id = states.length;
      index.set(key, id);
      pairs.push([state, count]);
      states.push({ accepting: dfa.states[state]!.accepting && count >= min && (max === null || count <= max), edges: [] });
    }
    return id;
  };
  stateOf(0, 0);
  for (let id = 0; id < states.length; id++) {
    const [state, count] = pairs[id]!;
    const next = max === null ? Math.min(count + 1, cap) : count + 1;
    if (max !== null && next > max) continue;
    states[id]!.edges = dfa.states[state]!.edges.map((edge) => ({ ranges: edge.ranges, to: stateOf(edge.to, next) }));
  }
  return { states };
}

/**
 * The constraints a pattern puts on a string as JSON Schema reads it (a search, not a whole
 * match, when `search`: a side that is not anchored may hold other characters), as automata
 * whose intersection is its language. Lookaheads at the start of a pattern that begins with `^`
 * are constraints of their own: `(?=A)` the strings that begin with a match of A, `(?!A)` the
 * others.
 */
export function patternConstraints(parsed: { node: RegexNode; startAnchored: boolean }, search: boolean): Dfa[] {
  const items = parsed.node.kind === 'sequence' ? parsed.node.items : [parsed.node];
  const lookaheads: Array<Extract<RegexNode, { kind: 'lookahead' }>> = [];
  while (items[lookaheads.length]?.kind === 'lookahead') lookaheads.push(items[lookaheads.length] as Extract<RegexNode, { kind: 'lookahead' }>);
  if (lookaheads.length > 0 && !parsed.startAnchored) throw new UnsupportedPattern('lookarounds in a pattern that does not begin with ^');
  const rest = items.slice(lookaheads.length);
  const node: RegexNode = rest.length === 1 ? rest[0]! : { kind: 'sequence', items: rest };
  const main = languageOf(node, search ? { ...(parsed.startAnchored ? {} : { before: PRINTABLE }), after: PRINTABLE } : {});
  return [main, ...lookaheads.map((lookahead) => {
    // What follows the lookahead's match may be anything, up to a `$` inside it.
    const begins = languageOf(lookahead.body, { after: EVERYTHING });
    return lookahead.negated ? complement(begins) : begins;
  })];
}

/**
 * The strings every automaton accepts, trimmed and minimal; null when there is none. Taken in
 * order, each product trimmed before the next, so that the first and narrowest constraints (a
 * format) keep every product small.
 */
export function intersectAll(automata: readonly Dfa[]): Dfa | null {
  let result: Dfa | null = null;
  for (const automaton of automata) {
    result = trim(minimize(result ? intersect(result, automaton) : automaton));
    if (!result) return null;
  }
  return result;
}

/** Whether the automaton accepts `text` (for tests and checks). */
export function accepts(dfa: Dfa, text: string): boolean {
  let state = 0;
  for (const char of text) {
    const codePoint = char.codePointAt(0)!;
    const edge = dfa.states[state]!.edges.find((candidate) => candidate.ranges.some(([a, b]) => a <= codePoint && codePoint <= b));
    if (!edge) return false;
    state = edge.to;
  }
  return dfa.states[state]!.accepting;
}

/**
 * GBNF of JSON string content accepted by a trimmed automaton: a rule per state, each one the
 * characters that leave it followed by the rule of the state they lead to (right-linear, so no
 * left recursion). Characters a JSON string cannot hold are left out first.
 */
export function dfaToGbnf(automaton: Dfa, rules: GbnfRuleSet, hint: string): string {
  const dfa = trim(minimize(intersect(automaton, stringsOf(WRITABLE))));
  if (!dfa) throw new UnsupportedPattern('no string a JSON value can hold');
  const names = dfa.states.map(() => rules.reserve(hint));
  const ends = dfa.states.map((state) => state.accepting && state.edges.length === 0);
  const bodyOf = (id: number): string => {
    const state = dfa.states[id]!;
    const options = state.edges.map((edge) => {
      const chars = group(charSetToGbnf({ ranges: edge.ranges, negated: false }));
      return ends[edge.to] ? chars : `${chars} ${names[edge.to]}`;
    });
    if (options.length === 0) return '""';
    const body = gbnfAlternatives(options);
    return state.accepting ? `${group(body)}?` : body;
  };
  dfa.states.forEach((_, id) => {
    if (id === 0 || !ends[id]) rules.set(names[id]!, bodyOf(id));
  });
  return names[0]!;
}
