/** Registered models (LMSP section 5). */

export type ModelStatus = 'ready' | 'missing' | 'digest_mismatch';

/** Model ids are chosen by the operator (LMSP section 2). */
export const MODEL_ID_PATTERN = /^[a-z0-9][a-z0-9._:-]{0,127}$/;

/** What a GGUF file's header says about the model. */
export interface GgufFacts {
  architecture: string | null;
  contextLength: number | null;
  parameters: number | null;
  quantization: string | null;
  tokenizer: string | null;
}

export interface Model extends GgufFacts {
  id: string;
  path: string;
  /** `sha256:<hex>` of the whole file. */
  digest: string;
  sizeBytes: number;
  mtimeMs: number;
  status: ModelStatus;
  builtin: boolean;
  createdAt: number;
  verifiedAt: number | null;
}
