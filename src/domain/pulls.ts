/**
 * Model pulls (LMSP 5.1): a `model_pull` task fetches a GGUF file from a source into the models
 * directory and registers it. This is what its record keeps beside the task.
 */

/** What a later attempt needs to continue the download (the validator of the bytes on disk). */
export interface PullResumeState {
  url: string;
  etag: string | null;
  lastModified: string | null;
  totalBytes: number | null;
  /** The answer's ETag and Last-Modified as sent, weak or strong (absent in older records). */
  seen?: { etag: string | null; lastModified: string | null };
}

export interface ModelPull {
  taskId: string;
  /** The id the model is registered under once the file is whole. */
  modelId: string;
  /** As the client sent it: `hf:OWNER/REPO/FILE.gguf[@REVISION]` or an `https://` URL. */
  source: string;
  /** The URL the source resolved to when the pull was created. */
  url: string;
  /** The models directory the file is written to (`<modelId>.gguf.partial`, then `<modelId>.gguf`). */
  modelsDir: string;
  expectedDigest: string | null;
  resume: PullResumeState | null;
  /** The whole file's, recorded before it is moved into place (so a restart can recognise it) and again with the model. */
  digest: string | null;
  sizeBytes: number | null;
}

/** At most this many pulls download at once, beside the generation slots (docs/models.md). */
export const MAX_CONCURRENT_PULLS = 2;
