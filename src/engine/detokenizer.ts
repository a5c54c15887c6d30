/** Turns generated tokens into text pieces that never split a UTF-8 character. */
import type { LlamaModel, Token } from 'node-llama-cpp';
import type { TokenText } from './output-shaper.js';

/** Tokens kept as context for detokenising the next ones (spaces, multi-byte characters). */
const DETOKENIZE_TAIL = 16;

export class Detokenizer {
  private pending: Token[] = [];
  private tail: Token[] = [];

  constructor(private readonly model: LlamaModel) {}

  push(token: Token): TokenText | null {
    this.pending.push(token);
    const text = this.model.detokenize(this.pending, false, this.tail);
    // A trailing replacement character means an unfinished multi-byte sequence: wait for more.
    if (text.endsWith('\uFFFD') && this.pending.length < 4) return null;
    return this.take(text);
  }

  /**
   * The end of a generation: the tokens held back. Those are held only while they end in an
   * unfinished character, which then never came: it is no character, and is left out of the text
   * (as OpenAI cuts an output at whole characters), its tokens still counted.
   */
  flush(): TokenText | null {
    if (this.pending.length === 0) return null;
    return this.take(this.model.detokenize(this.pending, false, this.tail).replace(/\uFFFD+$/u, ''));
  }

  private take(text: string): TokenText {
    const group = { text, tokens: this.pending };
    this.tail = [...this.tail, ...this.pending].slice(-DETOKENIZE_TAIL);
    this.pending = [];
    return group;
  }
}

/** The groups committed tokens made when they were generated (the same function of the tokens). */
export function replayGroups(detokenizer: Detokenizer, tokens: readonly Token[]): TokenText[] {
  const groups: TokenText[] = [];
  for (const token of tokens) {
    const group = detokenizer.push(token);
    if (group) groups.push(group);
  }
  const rest = detokenizer.flush();
  if (rest) groups.push(rest);
  return groups;
}
