/**
 * Turns generated tokens into the output units the engine reports (engine.ts OutputUnit): the
 * splitter classifies the text, and a unit is released only with whole tokens whose text is all
 * classified. So the committed tokens and the committed text always agree: after a restart the
 * committed tokens are replayed through the same splitter (nothing is emitted for them), and
 * generation goes on exactly where the uninterrupted run would have been (LMSP 7.5).
 */
import type { OutputUnit, ToolCallDelta } from './engine.js';
import type { OutputSplitter } from './output-splitter.js';

/** Tokens and their text, as the detokenizer groups them (never splitting a character). */
export interface TokenText {
  text: string;
  tokens: number[];
}

export class OutputShaper {
  /** Text length of everything pushed or replayed. */
  private length = 0;
  /** Text already reported (or committed before a restart). */
  private released = 0;
  private pending: Array<{ end: number; tokens: number[] }> = [];
  private readonly announced = new Set<number>();

  constructor(private readonly splitter: OutputSplitter) {}

  get stopped(): boolean {
    return this.splitter.stopped;
  }

  /** Committed output, replayed after a restart: it updates the state, and is never emitted again. */
  replay(groups: readonly TokenText[]): void {
    for (const group of groups) {
      this.length += group.text.length;
      this.splitter.push(group.text);
    }
    this.splitter.take(0, this.length, this.announced);
    this.released = this.length;
  }

  /** New output; returns the unit it releases, if any. */
  push(group: TokenText): OutputUnit | null {
    this.length += group.text.length;
    this.pending.push({ end: this.length, tokens: group.tokens });
    this.splitter.push(group.text);
    if (this.splitter.stopped) return this.release(this.pending.length, this.splitter.settledLength);
    let count = 0;
    while (count < this.pending.length && this.pending[count]!.end <= this.splitter.settledLength) count++;
    return count === 0 ? null : this.release(count, this.pending[count - 1]!.end);
  }

  /** The end of the generation: everything held is released. */
  finish(): OutputUnit | null {
    this.splitter.finish();
    return this.pending.length === 0 && this.splitter.settledLength <= this.released
      ? null
      : this.release(this.pending.length, this.splitter.settledLength);
  }

  private release(count: number, to: number): OutputUnit | null {
    const groups = this.pending.splice(0, count);
    const end = Math.max(this.released, to);
    const { content, calls } = this.splitter.take(this.released, end, this.announced);
    this.released = end;
    const tokens = groups.flatMap((group) => group.tokens);
    if (tokens.length === 0 && content === '' && calls.length === 0) return null;
    const unit: OutputUnit = { text: content, tokens };
    if (calls.length > 0) unit.toolCalls = calls satisfies ToolCallDelta[];
    return unit;
  }
}
