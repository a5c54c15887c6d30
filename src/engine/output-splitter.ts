/**
 * Splits a generation's text, as it grows, into message content and tool calls, and finds stop
 * sequences (LMSP 13 `stop`). Text that could still turn out to be the start of a stop sequence
 * or of the call prefix is held: it is classified only once the following text decides. The
 * split is a function of the text alone, so replaying the committed text after a restart puts
 * the splitter back in the state it had (LMSP 7.5).
 *
 * Under a grammar the calls are well formed, so reading them needs no validation: the call
 * prefix, a tool name, the params prefix, a JSON value, the suffix, and then either the
 * separator and the next prefix, or the end.
 */
import type { OutputLayout, ToolCallSyntax } from './grammar/constraint.js';
import type { GeneratedToolCall } from './types.js';

export type SegmentKind = 'content' | 'syntax' | 'arguments';

interface Segment {
  start: number;
  end: number;
  kind: SegmentKind;
  call: number;
}

interface CallState {
  name: string;
  /** Where its arguments start in the text. */
  argumentsStart: number;
  arguments: string;
  complete: boolean;
}

/** Reads one JSON value character by character and says where it ends. */
class JsonValueEnd {
  private depth = 0;
  private inString = false;
  private escaped = false;
  private scalar: 'number' | 'word' | null = null;
  private started = false;

  /** 'more': the character belongs to the value; 'ends': it does and completes it; 'ended': the value ended before it. */
  feed(char: string): 'more' | 'ends' | 'ended' {
    if (this.scalar === 'number') return /[0-9.eE+-]/.test(char) ? 'more' : 'ended';
    if (this.scalar === 'word') return /[a-z]/.test(char) ? 'more' : 'ended';
    if (!this.started && /\s/.test(char)) return 'more';
    this.started = true;
    if (this.inString) {
      if (this.escaped) this.escaped = false;
      else if (char === '\\') this.escaped = true;
      else if (char === '"') {
        this.inString = false;
        if (this.depth === 0) return 'ends';
      }
      return 'more';
    }
    if (char === '"') this.inString = true;
    else if (char === '{' || char === '[') this.depth++;
    else if (char === '}' || char === ']') {
      this.depth--;
      if (this.depth === 0) return 'ends';
    } else if (this.depth === 0 && /[-0-9]/.test(char)) this.scalar = 'number';
    else if (this.depth === 0 && /[a-z]/.test(char)) this.scalar = 'word';
    return 'more';
  }

  /** At the end of the text: a number or word at the top level is complete there. */
  get completeAtEnd(): boolean {
    return this.scalar !== null;
  }
}

type Mode =
  | { kind: 'content'; callsAllowed: boolean }
  | { kind: 'undecided' }
  | { kind: 'literal'; text: string; matched: number; then: 'name' | 'after-call' }
  | { kind: 'name' }
  | { kind: 'arguments'; reader: JsonValueEnd }
  | { kind: 'after-call' }
  | { kind: 'stopped' };

export class OutputSplitter {
  private text = '';
  /** Characters [0, settled) are classified. */
  private settled = 0;
  private readonly segments: Segment[] = [];
  private readonly calls: CallState[] = [];
  private mode: Mode;
  private readonly stops: string[];

  constructor(layout: OutputLayout, private readonly syntax: ToolCallSyntax | null, private readonly toolNames: readonly string[],
    stops: readonly string[]) {
    this.stops = stops.filter((stop) => stop.length > 0);
    const hasSyntax = syntax !== null && syntax.prefix.length > 0;
    if (layout === 'calls' && hasSyntax) this.mode = { kind: 'literal', text: syntax.prefix, matched: 0, then: 'name' };
    else if (layout === 'content-or-calls' && hasSyntax) this.mode = { kind: 'undecided' };
    else this.mode = { kind: 'content', callsAllowed: layout === 'text-then-calls' && hasSyntax };
  }

  get settledLength(): number {
    return this.settled;
  }

  /** A stop sequence was found: the output ends at `settledLength`. */
  get stopped(): boolean {
    return this.mode.kind === 'stopped';
  }

  push(text: string): void {
    if (this.mode.kind === 'stopped') return;
    this.text += text;
    this.advance(false);
  }

  /** The generation ended: held text is settled as content (or as the call it was in). */
  finish(): void {
    if (this.mode.kind === 'stopped') return;
    this.advance(true);
  }

  private mark(end: number, kind: SegmentKind, call = -1): void {
    if (end <= this.settled) return;
    const last = this.segments.at(-1);
    if (last && last.kind === kind && last.call === call && last.end === this.settled) last.end = end;
    else this.segments.push({ start: this.settled, end, kind, call });
    if (kind === 'arguments') this.calls[call]!.arguments += this.text.slice(this.settled, end);
    this.settled = end;
  }

  private advance(final: boolean): void {
    for (;;) {
      const before = this.settled;
      const mode = this.mode;
      switch (mode.kind) {
        case 'stopped': return;
        case 'content': this.content(mode.callsAllowed, final); break;
        case 'undecided': this.undecided(final); break;
        case 'literal': this.literal(mode); break;
        case 'name': this.name(final); break;
        case 'arguments': this.arguments(mode.reader, final); break;
        case 'after-call': this.afterCall(); break;
      }
      if (this.settled === before && this.mode === mode) return;
    }
  }

  private content(callsAllowed: boolean, final: boolean): void {
    const region = this.text.slice(this.settled);
    const needles = callsAllowed ? [...this.stops, this.syntax!.prefix] : this.stops;
    let best: { at: number; needle: string } | null = null;
    for (const needle of needles) {
      const at = region.indexOf(needle);
      if (at >= 0 && (best === null || at < best.at)) best = { at, needle };
    }
    if (best && !final) {
      // A longer needle that begins earlier may still complete with more text: it would win.
      const open = earliestOpenMatch(region.slice(0, best.at), region, needles);
      if (open >= 0) {
        this.mark(this.settled + open, 'content');
        return;
      }
    }
    if (best) {
      this.mark(this.settled + best.at, 'content');
      if (callsAllowed && best.needle === this.syntax!.prefix && !this.stops.includes(best.needle)) {
        this.mark(this.settled + best.needle.length, 'syntax');
        this.mode = { kind: 'name' };
      } else {
        this.mode = { kind: 'stopped' };
      }
      return;
    }
    this.mark(this.settled + region.length - (final ? 0 : heldLength(region, needles)), 'content');
  }

  private undecided(final: boolean): void {
    const region = this.text.slice(this.settled);
    const prefix = this.syntax!.prefix;
    if (region.startsWith(prefix)) {
      this.mode = { kind: 'literal', text: prefix, matched: 0, then: 'name' };
    } else if (final || !prefix.startsWith(region)) {
      this.mode = { kind: 'content', callsAllowed: false };
    }
  }

  private literal(mode: Extract<Mode, { kind: 'literal' }>): void {
    let end = this.settled;
    while (mode.matched < mode.text.length && end < this.text.length) {
      end++;
      mode.matched++;
    }
    this.mark(end, 'syntax');
    if (mode.matched === mode.text.length) this.mode = mode.then === 'name' ? { kind: 'name' } : { kind: 'after-call' };
  }

  private name(final: boolean): void {
    const region = this.text.slice(this.settled);
    const paramsPrefix = this.syntax!.paramsPrefix;
    const name = this.toolNames.find((candidate) => region.startsWith(candidate + paramsPrefix));
    if (name !== undefined) {
      this.mark(this.settled + name.length + paramsPrefix.length, 'syntax');
      this.calls.push({ name, argumentsStart: this.settled, arguments: '', complete: false });
      this.mode = { kind: 'arguments', reader: new JsonValueEnd() };
    } else if (final) {
      this.mark(this.text.length, 'syntax');
    }
  }

  private arguments(reader: JsonValueEnd, final: boolean): void {
    const call = this.calls.length - 1;
    let end = this.settled;
    let ended = false;
    while (end < this.text.length && !ended) {
      const verdict = reader.feed(this.text[end]!);
      ended = verdict !== 'more';
      if (verdict !== 'ended') end++;
    }
    this.mark(end, 'arguments', call);
    ended ||= final && reader.completeAtEnd;
    if (ended) {
      this.calls[call]!.complete = true;
      this.mode = { kind: 'literal', text: this.syntax!.suffix, matched: 0, then: 'after-call' };
    }
  }

  /** More text after a call can only be the separator and the next call's prefix. */
  private afterCall(): void {
    if (this.settled < this.text.length) {
      this.mode = { kind: 'literal', text: (this.syntax!.betweenCalls ?? '') + this.syntax!.prefix, matched: 0, then: 'name' };
    }
  }

  /** The content and call arguments classified in [from, to), with calls whose name is known by `to`. */
  take(from: number, to: number, announced: Set<number>): { content: string; calls: Array<{ index: number; name: string; arguments: string }> } {
    let content = '';
    const deltas = new Map<number, string>();
    for (const segment of this.segments) {
      if (segment.end <= from || segment.start >= to) continue;
      const piece = this.text.slice(Math.max(from, segment.start), Math.min(to, segment.end));
      if (segment.kind === 'content') content += piece;
      else if (segment.kind === 'arguments') deltas.set(segment.call, (deltas.get(segment.call) ?? '') + piece);
    }
    const calls: Array<{ index: number; name: string; arguments: string }> = [];
    this.calls.forEach((call, index) => {
      if (call.argumentsStart > to) return;
      const delta = deltas.get(index) ?? '';
      if (!announced.has(index) || delta.length > 0) calls.push({ index, name: call.name, arguments: delta });
      announced.add(index);
    });
    return { content, calls };
  }

  /** The calls written so far, in order. */
  toolCalls(): GeneratedToolCall[] {
    return this.calls.map((call) => ({ name: call.name, arguments: call.arguments, status: call.complete ? 'completed' : 'incomplete' }));
  }
}

/** The longest end of `region` that could begin one of the needles (which it does not contain). */
export function heldLength(region: string, needles: readonly string[]): number {
  let held = 0;
  for (const needle of needles) {
    for (let length = Math.min(region.length, needle.length - 1); length > held; length--) {
      if (region.endsWith(needle.slice(0, length))) {
        held = length;
        break;
      }
    }
  }
  return held;
}

/**
 * The first position before `limit.length` where `region`'s remainder is a proper prefix of a
 * needle (a match that more text could complete), or -1.
 */
function earliestOpenMatch(limit: string, region: string, needles: readonly string[]): number {
  for (let at = 0; at < limit.length; at++) {
    const rest = region.slice(at);
    if (needles.some((needle) => needle.length > rest.length && needle.startsWith(rest))) return at;
  }
  return -1;
}
