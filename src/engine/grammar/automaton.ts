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
import { complementRanges, intersectRanges, MAX_CODE_POINT, normalizeRanges, type Ranges } from './ranges.js';
import { charSetToGbnf, UnsupportedPattern, type CharSet, type RegexNode } from './regex.js';

/** States of any one automaton, deterministic or not. */
export const MAX_STATES = 10_000;
/** What making a state costs in steps: its set, key and record weigh more than a step. */
const STATE_STEPS = 40;

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

/**
 * Steps of work one schema's automata may take in all (states made, edges looked at, splits
 * tried), counted, not timed, so that the same schema is accepted or refused alike on every
 * machine, and no request holds the thread that answers the others for long (a refusal at the
 * bound took 0.1-0.2 s on a 2-core machine; Zod's string formats take 1-15% of it).
 */
export const MAX_WORK = 1_000_000;
/** Steps for all the strings of one schema (or all the tools of a request) together. */
export const MAX_SCHEMA_WORK = 3 * MAX_WORK;
let workLeft = Infinity;

function spend(steps: number): void {
  workLeft -= steps;
  if (workLeft < 0) tooLarge();
}

/** The steps of work `build` takes (for tests and calibration); no budget applies meanwhile. */
export function stepsOf(build: () => unknown): number {
  const outer = workLeft;
  workLeft = Number.MAX_SAFE_INTEGER;
  try {
    build();
    return Number.MAX_SAFE_INTEGER - workLeft;
  } finally {
    workLeft = outer;
  }
}

/**
 * Runs `build` with at most `limit` steps of work for the automata it makes; inside another
 * budget (a whole schema), what it spends comes out of that one too.
 */
export function withWorkBudget<T>(build: () => T, limit = MAX_WORK): T {
  const outer = workLeft;
  const allowed = Math.min(outer, limit);
  workLeft = allowed;
  try {
    return build();
  } finally {
    workLeft = outer === Infinity ? Infinity : outer - (allowed - workLeft);
  }
}

/** A set's ranges, made once however often a repetition copies its node. */
const rangeCache = new WeakMap<CharSet, Ranges>();

function rangesOf(set: CharSet): Ranges {
  let ranges = rangeCache.get(set);
  if (!ranges) {
    ranges = set.negated ? complementRanges(set.ranges) : normalizeRanges(set.ranges);
    rangeCache.set(set, ranges);
  }
  return ranges;
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
    spend(1);
    this.states.push({ epsilon: [], edges: [] });
    return this.states.length - 1;
  }

  /** A fragment for `node`, from `start` to a new end state. */
  build(node: RegexNode, start: number): number {
    switch (node.kind) {
      case 'chars': {
        const end = this.add();
        const ranges = rangesOf(node.set);
        spend(ranges.length);
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

/**
 * The states of an automaton under construction, numbered as first met: each key (a set of NFA
 * states, a pair of states) becomes one state, with the item it stands for, within MAX_STATES.
 */
class StateNumbering<T> {
  readonly states: DfaState[] = [];
  readonly items: T[] = [];
  private readonly ids = new Map<string, number>();

  idOf(key: string, item: T, accepting: boolean): number {
    let id = this.ids.get(key);
    if (id === undefined) {
      if (this.states.length >= MAX_STATES) tooLarge();
      spend(STATE_STEPS);
      id = this.states.length;
      this.ids.set(key, id);
      this.items.push(item);
      this.states.push({ accepting, edges: [] });
    }
    return id;
  }
}

/** `ranges` over the target of each code point: adjacent and equal targets merged into edges. */
function edgesFromIntervals(intervals: Array<{ from: number; to: number; target: number }>): DfaState['edges'] {
  const byTarget = new Map<number, Ranges>();
  for (const { from, to, target } of intervals) {
    const list = byTarget.get(target) ?? [];
    list.push([from, to]);
    byTarget.set(target, list);
  }
  return [...byTarget].map(([to, ranges]) => ({ ranges: normalizeRanges(ranges), to }));
}

/** The boundaries at which the edges of a state may change target, in order. */
function boundaries(rangeLists: Ranges[]): number[] {
  const points = new Set<number>();
  for (const ranges of rangeLists) {
    spend(ranges.length);
    for (const [from, to] of ranges) points.add(from).add(to + 1);
  }
  return [...points].sort((a, b) => a - b);
}

/** The index of `value` in the sorted `points` (it is one of them). */
function indexOf(points: readonly number[], value: number): number {
  let low = 0;
  let high = points.length - 1;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (points[middle]! < value) low = middle + 1;
    else high = middle;
  }
  return low;
}

function determinize(nfa: Nfa, start: number, accept: number): Dfa {
  const closure = (seeds: Iterable<number>): number[] => {
    const seen = new Set(seeds);
    const stack = [...seen];
    while (stack.length > 0) {
      for (const next of nfa.states[stack.pop()!]!.epsilon) {
        if (!seen.has(next)) {
          seen.add(next);
          stack.push(next);
        }
      }
    }
    spend(seen.size);
    return [...seen].sort((a, b) => a - b);
  };
  const numbering = new StateNumbering<number[]>();
  const { states, items: sets } = numbering;
  const stateOf = (set: number[]): number => numbering.idOf(set.join(','), set, set.includes(accept));
  stateOf(closure([start]));
  for (let id = 0; id < states.length; id++) {
    const edges = sets[id]!.flatMap((member) => nfa.states[member]!.edges);
    const points = boundaries(edges.map((edge) => edge.ranges));
    // The NFA targets of each interval between two boundaries, gathered range by range.
    const targets: Array<Set<number> | undefined> = new Array(Math.max(0, points.length - 1));
    for (const edge of edges) {
      for (const [from, to] of edge.ranges) {
        const first = indexOf(points, from);
        const last = indexOf(points, to + 1);
        // Two searches and the intervals between: a range costs more than one step.
        spend(last - first + 8);
        for (let k = first; k < last; k++) (targets[k] ??= new Set()).add(edge.to);
      }
    }
    const intervals: Array<{ from: number; to: number; target: number }> = [];
    const closed = new Map<string, number>();
    for (let k = 0; k + 1 < points.length; k++) {
      const here = targets[k];
      if (!here) continue;
      // Intervals with the same targets share their closure.
      const key = [...here].sort((x, y) => x - y).join(',');
      let target = closed.get(key);
      if (target === undefined) {
        target = stateOf(closure(here));
        closed.set(key, target);
      }
      intervals.push({ from: points[k]!, to: points[k + 1]! - 1, target });
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
  return { states: [{ accepting: true, edges: [{ ranges: normalizeRanges(ranges), to: 0 }] }] };
}

/** The strings both automata accept. */
export function intersect(a: Dfa, b: Dfa): Dfa {
  const numbering = new StateNumbering<[number, number]>();
  const { states, items: pairs } = numbering;
  const stateOf = (x: number, y: number): number => numbering.idOf(`${x},${y}`, [x, y], a.states[x]!.accepting && b.states[y]!.accepting);
  stateOf(0, 0);
  for (let id = 0; id < states.length; id++) {
    const [x, y] = pairs[id]!;
    const edges: DfaState['edges'] = [];
    spend(a.states[x]!.edges.length * b.states[y]!.edges.length + 1);
    for (const ea of a.states[x]!.edges) {
      for (const eb of b.states[y]!.edges) {
        spend(ea.ranges.length + eb.ranges.length);
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
    spend(state.edges.length + 1);
    const covered = normalizeRanges(state.edges.flatMap((edge) => edge.ranges));
    const rest = complementRanges(covered);
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

/**
 * The smallest automaton of the same strings: Hopcroft's partition refinement over the atoms of
 * the alphabet (the intervals no edge boundary splits), O(atoms × n log n) where Moore's rounds
 * would take n rounds for a chain of n states (a counted repetition).
 */
export function minimize(dfa: Dfa): Dfa {
  const n = dfa.states.length;
  const points = boundaries(dfa.states.flatMap((state) => state.edges.map((edge) => edge.ranges)));
  const atoms = Math.max(0, points.length - 1);
  // A dead state (n) takes every transition the automaton leaves out.
  const dead = n;
  const size = n + 1;
  spend(size * atoms + 1);
  const delta = new Int32Array(size * atoms).fill(dead);
  dfa.states.forEach((state, id) => {
    for (const edge of state.edges) {
      for (const [from, to] of edge.ranges) {
        for (let k = indexOf(points, from), last = indexOf(points, to + 1); k < last; k++) delta[id * atoms + k] = edge.to;
      }
    }
  });
  // Sources of each (atom, target): the inverse of delta.
  const inverse = new Map<number, number[]>();
  for (let state = 0; state < size; state++) {
    for (let atom = 0; atom < atoms; atom++) {
      const key = delta[state * atoms + atom]! * atoms + atom;
      const list = inverse.get(key);
      if (list) list.push(state);
      else inverse.set(key, [state]);
    }
  }
  // Blocks: accepting and not (the dead state is not accepting).
  const blockOf = new Int32Array(size);
  const blocks: number[][] = [[], []];
  for (let state = 0; state < size; state++) {
    const accepting = state < n && dfa.states[state]!.accepting;
    blockOf[state] = accepting ? 1 : 0;
    blocks[accepting ? 1 : 0]!.push(state);
  }
  if (blocks[1]!.length === 0) blocks.pop();
  // The splitters still to use, (block, atom), and which are pending, by block * atoms + atom.
  const queue: Array<[number, number]> = [];
  const pending = new Set<number>();
  const enqueue = (block: number, atom: number) => {
    queue.push([block, atom]);
    pending.add(block * atoms + atom);
  };
  const smaller = blocks.length === 2 && blocks[1]!.length < blocks[0]!.length ? 1 : 0;
  for (let atom = 0; atom < atoms; atom++) enqueue(smaller, atom);
  const touched = new Map<number, number[]>();
  while (queue.length > 0) {
    const [splitter, atom] = queue.pop()!;
    pending.delete(splitter * atoms + atom);
    touched.clear();
    for (const target of blocks[splitter]!) {
      for (const source of inverse.get(target * atoms + atom) ?? []) {
        const block = blockOf[source]!;
        const list = touched.get(block);
        if (list) list.push(source);
        else touched.set(block, [source]);
      }
    }
    spend(touched.size + 1);
    for (const [block, inside] of touched) {
      const members = blocks[block]!;
      if (inside.length === members.length) continue;
      // Split: the states that lead into the splitter leave for a new block.
      const moved = new Set(inside);
      const stay = members.filter((state) => !moved.has(state));
      spend(members.length);
      const fresh = blocks.length;
      blocks[block] = stay;
      blocks.push(inside);
      for (const state of inside) blockOf[state] = fresh;
      // A block still pending as a splitter needs both halves pending; otherwise the smaller does.
      const carry = inside.length < stay.length ? fresh : block;
      for (let k = 0; k < atoms; k++) {
        if (pending.has(block * atoms + k)) enqueue(fresh, k);
        else enqueue(carry, k);
      }
    }
  }
  // Blocks numbered as first met from state 0, so the start stays state 0; the dead block goes.
  const deadBlock = blockOf[dead]!;
  const number = new Map<number, number>();
  for (let state = 0; state < n; state++) {
    const block = blockOf[state]!;
    if (block !== deadBlock && !number.has(block)) number.set(block, number.size);
  }
  const states: DfaState[] = Array.from({ length: number.size }, () => ({ accepting: false, edges: [] }));
  const done = new Set<number>();
  for (let state = 0; state < n; state++) {
    const block = blockOf[state]!;
    if (block === deadBlock || done.has(block)) continue;
    done.add(block);
    const edges = dfa.states[state]!.edges
      .filter((edge) => blockOf[edge.to] !== deadBlock)
      .map((edge) => ({ ranges: edge.ranges, to: number.get(blockOf[edge.to]!)! }));
    states[number.get(block)!] = { accepting: dfa.states[state]!.accepting, edges: mergeEdges(edges) };
  }
  // An automaton that accepts nothing keeps a start state that accepts nothing.
  return states.length > 0 ? { states } : { states: [{ accepting: false, edges: [] }] };
}

function mergeEdges(edges: DfaState['edges']): DfaState['edges'] {
  const byTarget = new Map<number, Ranges>();
  for (const edge of edges) byTarget.set(edge.to, [...(byTarget.get(edge.to) ?? []), ...edge.ranges]);
  return [...byTarget].map(([to, ranges]) => ({ ranges: normalizeRanges(ranges), to }));
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
  const numbering = new StateNumbering<[number, number]>();
  const { states, items: pairs } = numbering;
  const stateOf = (state: number, count: number): number => numbering.idOf(`${state},${count}`, [state, count],
    dfa.states[state]!.accepting && count >= min && (max === null || count <= max));
  stateOf(0, 0);
  for (let id = 0; id < states.length; id++) {
    const [state, count] = pairs[id]!;
    const next = max === null ? Math.min(count + 1, cap) : count + 1;
    if (max !== null && next > max) continue;
    spend(dfa.states[state]!.edges.length + 1);
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
    spend(state.edges.reduce((sum, edge) => sum + edge.ranges.length, 1));
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
