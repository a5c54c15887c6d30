/**
 * A model's vocabulary as its file lists it (`tokenizer.ggml.tokens`), read in one place: its
 * size, which token ids must stay under, and the longest token, which bounds a text's length in
 * tokens from below.
 */
import type { LlamaModel } from 'node-llama-cpp';

/** The token texts the file lists, or null when it lists none. */
export function vocabularyTokens(model: LlamaModel): readonly unknown[] | null {
  const tokens = (model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: unknown } } }).tokenizer?.ggml?.tokens;
  return Array.isArray(tokens) ? tokens : null;
}

/** The most bytes of text one token of a vocabulary stands for, by model. */
const longestTokens = new WeakMap<LlamaModel, number>();

/**
 * A lower bound of a text's length in tokens, found without tokenizing it: its bytes over the
 * most bytes a token of the vocabulary covers. A token's text in the file is at least as long in
 * UTF-8 as the bytes it stands for (byte-level BPE writes one character per byte, SentencePiece
 * `▁` for a space), so the bound holds for any tokenizer. 0 when the file lists no tokens.
 *
 * Tokenizing is not linear in every input (a run of one letter, or base64, tens of thousands of
 * bytes long takes llama.cpp seconds per 100 KB, growing with its square), so an input far
 * longer than any context is told apart by this before it reaches the tokenizer.
 */
export function tokensAtLeast(model: LlamaModel, text: string): number {
  let longest = longestTokens.get(model);
  if (longest === undefined) {
    longest = (vocabularyTokens(model) ?? []).reduce((most: number, token) => Math.max(most, typeof token === 'string' ? Buffer.byteLength(token) : 0), 0);
    longestTokens.set(model, longest);
  }
  return longest === 0 ? 0 : Math.ceil(Buffer.byteLength(text) / longest);
}
