/**
 * Synthetic llama-architecture models, written by our own code: the built-in `lmsp-tiny` and the
 * larger models the benchmarks use. Weights come from a seeded integer PRNG and only exact
 * IEEE arithmetic (no Math.sin/log), so the bytes, and therefore the digest, are identical on
 * every machine.
 *
 * The vocabulary is byte level: `<unk>`, `<s>`, `</s>`, the 256 byte tokens `<0x00>`..`<0xFF>`
 * and a normal `▁` token, without which SentencePiece-style detokenisation loses spaces.
 *
 * End-of-sequence is made unreachable through the weights, since a token bias cannot forbid it:
 * hidden dimension 0 holds a large constant in every token embedding, no layer writes to it and
 * no layer reads it, so after the final norm it is a large positive number; the output rows of
 * ids 0-2 (and of bytes that are not printable ASCII) carry a strongly negative weight on that
 * dimension. The model therefore only ever writes printable ASCII and spaces, and never stops
 * before `max_output_tokens`.
 */
import type { GgufFacts } from '../domain/models.js';
import type { GgufFile, GgufTensor, GgufTensorType, GgufValue } from './gguf-writer.js';

export interface SyntheticModelOptions {
  name: string;
  embedding: number;
  layers: number;
  feedForward: number;
  heads: number;
  contextLength: number;
  tensorType: GgufTensorType;
  seed: number;
  /** A Jinja chat template to store in the file (tests of template rendering). */
  chatTemplate?: string;
  /**
   * Control tokens appended to the vocabulary (after `▁`), such as ChatML's `<|im_start|>` and
   * `<|im_end|>`: a template's markers then tokenize as one token each, as in real models. The
   * model never writes them, like the other non-printable tokens.
   */
  controlTokens?: readonly string[];
  /** `tokenizer.ggml.add_bos_token`; true unless set (ChatML models such as Qwen add none). */
  addBosToken?: boolean;
  /** `tokenizer.ggml.add_space_prefix`, written only when set. */
  addSpacePrefix?: boolean;
}

/** The built-in model. Changing anything here changes its digest everywhere. */
export const LMSP_TINY: SyntheticModelOptions = {
  name: 'lmsp-tiny',
  embedding: 64,
  layers: 2,
  feedForward: 128,
  heads: 4,
  contextLength: 16384,
  tensorType: 'f32',
  seed: 0x6c6d7370, // "lmsp"
};

/** The benchmark model of issue "measure it": 512 wide, 8 layers, f16. */
export const BENCH_MODEL: SyntheticModelOptions = {
  name: 'lmsp-bench-512x8',
  embedding: 512,
  layers: 8,
  feedForward: 1408,
  heads: 8,
  contextLength: 16384,
  tensorType: 'f16',
  seed: 0x62656e63, // "benc"
};

const SPECIAL_TOKENS = ['<unk>', '<s>', '</s>'] as const;
const TOKEN_TYPE_NORMAL = 1;
const TOKEN_TYPE_UNKNOWN = 2;
const TOKEN_TYPE_CONTROL = 3;
const TOKEN_TYPE_BYTE = 6;
const BYTE_TOKEN_OFFSET = SPECIAL_TOKENS.length;
const SPACE_TOKEN_ID = BYTE_TOKEN_OFFSET + 256;
/** Vocabulary size without `controlTokens`; control token k has id SYNTHETIC_VOCABULARY_SIZE + k. */
export const SYNTHETIC_VOCABULARY_SIZE = SPACE_TOKEN_ID + 1;

/** The id of a byte's token, and of `▁`, in every synthetic vocabulary. */
export function syntheticByteTokenId(byte: number): number {
  return BYTE_TOKEN_OFFSET + byte;
}
export const SYNTHETIC_SPACE_TOKEN_ID = SPACE_TOKEN_ID;

/** The constant held in hidden dimension 0 of every embedding. */
const CONSTANT_DIMENSION_VALUE = 16;
/** Weight of the constant dimension in the output row of a token that must never be chosen. */
const FORBIDDEN_TOKEN_WEIGHT = -64;
const SELF_AVOIDANCE = 1;
const OUTPUT_NOISE = 2;

/** mulberry32: a 32-bit PRNG using integer operations only. */
function createRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function vocabulary(controlTokens: readonly string[]): { tokens: string[]; types: number[]; scores: number[] } {
  const tokens: string[] = [...SPECIAL_TOKENS];
  const types = [TOKEN_TYPE_UNKNOWN, TOKEN_TYPE_CONTROL, TOKEN_TYPE_CONTROL];
  for (let byte = 0; byte < 256; byte++) {
    tokens.push(`<0x${byte.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(TOKEN_TYPE_BYTE);
  }
  tokens.push('\u2581');
  types.push(TOKEN_TYPE_NORMAL);
  for (const token of controlTokens) {
    tokens.push(token);
    types.push(TOKEN_TYPE_CONTROL);
  }
  return { tokens, types, scores: tokens.map(() => 0) };
}

/** Whether generating this token id is allowed: printable ASCII bytes and the space token. */
function isWritableToken(id: number): boolean {
  if (id === SPACE_TOKEN_ID) return true;
  const byte = id - BYTE_TOKEN_OFFSET;
  return byte >= 0x21 && byte <= 0x7e;
}

/** A preference per writable token, so that the text looks like words: letters and spaces first. */
function tokenPreference(id: number): number {
  if (id === SPACE_TOKEN_ID) return 1.2;
  const byte = id - BYTE_TOKEN_OFFSET;
  if (byte >= 0x61 && byte <= 0x7a) return 0.8; // a-z
  if (byte >= 0x41 && byte <= 0x5a) return 0; // A-Z
  return -0.6;
}

/** What the GGUF reader reports for a synthetic model, known without reading the file. */
export function syntheticModelFacts(options: SyntheticModelOptions): GgufFacts {
  const parameters = buildSyntheticModel(options).tensors.reduce((sum, tensor) => sum + tensor.dims.reduce((product, dim) => product * dim, 1), 0);
  return {
    architecture: 'llama',
    contextLength: options.contextLength,
    parameters,
    quantization: options.tensorType === 'f32' ? 'F32' : 'F16',
    tokenizer: 'llama',
  };
}

export function buildSyntheticModel(options: SyntheticModelOptions): GgufFile {
  const { embedding, layers, feedForward, heads, contextLength, tensorType, seed } = options;
  if (embedding % heads !== 0) throw new Error('embedding must be a multiple of heads');
  const random = createRandom(seed);
  const uniform = (scale: number) => (random() * 2 - 1) * scale;
  const vocab = vocabulary(options.controlTokens ?? []);
  const vocabSize = vocab.tokens.length;

  // Every tensor's values are drawn in a fixed order, at build time, so the order in which the
  // writer asks for them cannot change the bytes.
  const tensors: GgufTensor[] = [];
  const add = (name: string, dims: number[], values: Float32Array, type: GgufTensorType = tensorType) => {
    tensors.push({ name, dims, type, values: () => values });
  };
  const matrix = (inputs: number, outputs: number, scale: number, zeroOutputRow0 = false) => {
    const values = new Float32Array(inputs * outputs);
    for (let row = 0; row < outputs; row++) {
      for (let column = 0; column < inputs; column++) {
        const value = uniform(scale);
        values[row * inputs + column] = zeroOutputRow0 && row === 0 ? 0 : value;
      }
    }
    return values;
  };
  /** Norm weights of 1, except dimension 0 which must not feed the layer. */
  const norm = (hideConstant: boolean) => {
    const values = new Float32Array(embedding).fill(1);
    if (hideConstant) values[0] = 0;
    return values;
  };

  const tokenEmbedding = new Float32Array(vocabSize * embedding);
  for (let token = 0; token < vocabSize; token++) {
    for (let dim = 0; dim < embedding; dim++) {
      const value = uniform(1);
      tokenEmbedding[token * embedding + dim] = dim === 0 ? CONSTANT_DIMENSION_VALUE : value;
    }
  }
  add('token_embd.weight', [embedding, vocabSize], tokenEmbedding);

  const projectionScale = 1.7 / Math.sqrt(embedding);
  const feedForwardScale = 1.7 / Math.sqrt(feedForward);
  for (let layer = 0; layer < layers; layer++) {
    const prefix = `blk.${layer}`;
    add(`${prefix}.attn_norm.weight`, [embedding], norm(true), 'f32');
    add(`${prefix}.attn_q.weight`, [embedding, embedding], matrix(embedding, embedding, projectionScale * 2));
    add(`${prefix}.attn_k.weight`, [embedding, embedding], matrix(embedding, embedding, projectionScale * 2));
    add(`${prefix}.attn_v.weight`, [embedding, embedding], matrix(embedding, embedding, projectionScale));
    add(`${prefix}.attn_output.weight`, [embedding, embedding], matrix(embedding, embedding, projectionScale, true));
    add(`${prefix}.ffn_norm.weight`, [embedding], norm(true), 'f32');
    add(`${prefix}.ffn_gate.weight`, [embedding, feedForward], matrix(embedding, feedForward, projectionScale));
    add(`${prefix}.ffn_up.weight`, [embedding, feedForward], matrix(embedding, feedForward, projectionScale));
    add(`${prefix}.ffn_down.weight`, [feedForward, embedding], matrix(feedForward, embedding, feedForwardScale, true));
  }
  add('output_norm.weight', [embedding], norm(false), 'f32');

  // Each output row leans against its own token's embedding, so the model avoids the tokens it
  // has just seen (through the residual and the attention mix) and its greedy text keeps moving
  // instead of settling on one repeated token.
  const output = new Float32Array(vocabSize * embedding);
  for (let token = 0; token < vocabSize; token++) {
    for (let dim = 0; dim < embedding; dim++) {
      const value = uniform(OUTPUT_NOISE) - SELF_AVOIDANCE * tokenEmbedding[token * embedding + dim]!;
      let weight = value;
      if (dim === 0) weight = isWritableToken(token) ? tokenPreference(token) / 2 : FORBIDDEN_TOKEN_WEIGHT;
      output[token * embedding + dim] = weight;
    }
  }
  add('output.weight', [embedding, vocabSize], output);

  const metadata: Array<readonly [string, GgufValue]> = [
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['general.name', { type: 'string', value: options.name }],
    ['general.file_type', { type: 'u32', value: tensorType === 'f32' ? 0 : 1 }],
    ['general.quantization_version', { type: 'u32', value: 2 }],
    ['llama.context_length', { type: 'u32', value: contextLength }],
    ['llama.embedding_length', { type: 'u32', value: embedding }],
    ['llama.block_count', { type: 'u32', value: layers }],
    ['llama.feed_forward_length', { type: 'u32', value: feedForward }],
    ['llama.attention.head_count', { type: 'u32', value: heads }],
    ['llama.attention.head_count_kv', { type: 'u32', value: heads }],
    ['llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: 1e-5 }],
    ['llama.rope.dimension_count', { type: 'u32', value: embedding / heads }],
    ['llama.vocab_size', { type: 'u32', value: vocabSize }],
    ['tokenizer.ggml.model', { type: 'string', value: 'llama' }],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', values: vocab.tokens }],
    ['tokenizer.ggml.scores', { type: 'array', itemType: 'f32', values: vocab.scores }],
    ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', values: vocab.types }],
    ['tokenizer.ggml.bos_token_id', { type: 'u32', value: 1 }],
    ['tokenizer.ggml.eos_token_id', { type: 'u32', value: 2 }],
    ['tokenizer.ggml.unknown_token_id', { type: 'u32', value: 0 }],
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: options.addBosToken ?? true }],
    ['tokenizer.ggml.add_eos_token', { type: 'bool', value: false }],
    ...(options.addSpacePrefix === undefined ? [] : [['tokenizer.ggml.add_space_prefix', { type: 'bool', value: options.addSpacePrefix }] as const]),
    ...(options.chatTemplate ? [['tokenizer.chat_template', { type: 'string', value: options.chatTemplate }] as const] : []),
  ];
  return { metadata, tensors };
}
