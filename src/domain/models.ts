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
  /**
   * `device:inode:ctime-ns` of the file as it was hashed; null for a record from before it was
   * kept. Size, mtime and this unchanged mean the file is the one hashed (LMSP 5).
   */
  fileIdentity: string | null;
  status: ModelStatus;
  builtin: boolean;
  createdAt: number;
  verifiedAt: number | null;
}

/** What says whether a model file changed since it was hashed, read from its `lstat(…, {bigint: true})`. */
export interface FileStamp {
  sizeBytes: number;
  mtimeMs: number;
  fileIdentity: string;
}

export function fileStampOf(info: { size: bigint; mtimeMs: bigint; dev: bigint; ino: bigint; ctimeNs: bigint }): FileStamp {
  return { sizeBytes: Number(info.size), mtimeMs: Number(info.mtimeMs), fileIdentity: `${info.dev}:${info.ino}:${info.ctimeNs}` };
}

/** Whether the file is, by its stamp, the one recorded: no re-hash needed. */
export function sameFile(model: Pick<Model, 'sizeBytes' | 'mtimeMs' | 'fileIdentity'>, stamp: FileStamp): boolean {
  return model.sizeBytes === stamp.sizeBytes && model.mtimeMs === stamp.mtimeMs && model.fileIdentity === stamp.fileIdentity;
}
