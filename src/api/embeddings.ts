/**
 * Wire types of the Embeddings API (LMSP section 14) and the pure function that shapes its
 * answer. Vectors go out as float32 values, as llama.cpp computes them: the `float` numbers and
 * the `base64` bytes (little-endian float32, as OpenAI's SDKs decode them) are the same values.
 */

export type EmbeddingEncoding = 'float' | 'base64';

export interface CreateEmbeddingBody {
  model: string;
  input: string | string[] | number[] | number[][];
  encoding_format?: EmbeddingEncoding | null;
  dimensions?: number | null;
  /** Accepted, as OpenAI's API does; nothing is done with it. */
  user?: string | null;
}

export interface EmbeddingObject {
  object: 'embedding';
  index: number;
  /** float: the numbers; base64: little-endian float32 bytes. */
  embedding: number[] | string;
}

export interface EmbeddingList {
  object: 'list';
  data: EmbeddingObject[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

/** The vector as the little-endian float32 bytes OpenAI's `base64` encoding carries. */
export function embeddingToBase64(vector: readonly number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, index) => bytes.writeFloatLE(value, index * 4));
  return bytes.toString('base64');
}

/** The answer of `POST /v1/embeddings`: one object per input, in input order. */
export function toEmbeddingList(model: string, result: { embeddings: readonly (readonly number[])[]; promptTokens: readonly number[] },
  encoding: EmbeddingEncoding): EmbeddingList {
  const tokens = result.promptTokens.reduce((sum, count) => sum + count, 0);
  return {
    object: 'list',
    data: result.embeddings.map((vector, index) => ({
      object: 'embedding',
      index,
      embedding: encoding === 'base64' ? embeddingToBase64(vector) : vector.map((value) => Math.fround(value)),
    })),
    model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}
