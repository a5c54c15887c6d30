/** Registered models (LMSP section 5). */
import type { ModelStatus } from '../api/types.js';

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
