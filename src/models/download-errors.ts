/**
 * How a model download fails (LMSP 5.1, 9). Every failure carries the task error code the pull
 * task records, a reason a program can branch on, and whether a later attempt could continue
 * from the partial file (`resumable`). A resumable failure keeps the partial file; a final one
 * has removed it by the time the error reaches the caller.
 */
import type { TaskErrorCode } from '../domain/errors.js';

export type DownloadFailureReason =
  /** No answer came: DNS, refused, closed or reset before a whole head (resumable; TLS errors final). */
  | 'connection_failed'
  /** The connection dropped or reset before the whole body arrived (resumable). */
  | 'connection_lost'
  /** No byte arrived for the idle timeout (resumable). */
  | 'timeout'
  /** The server answered an error status (408, 429 and 5xx resumable; other 4xx final). */
  | 'http_status'
  /** More bytes than declared, or sizes that disagree with Content-Length/Content-Range. */
  | 'length_mismatch'
  /** The server kept answering range requests with ranges that cannot be used. */
  | 'range_unusable'
  /** A redirect to a scheme other than https (or from https down to http). */
  | 'redirect_refused'
  | 'too_many_redirects'
  /** An answer that is not valid HTTP/1.1: a malformed head, a transfer coding other than chunked, broken chunk framing. */
  | 'invalid_response'
  /** A compressed body: ranges and sizes would count compressed bytes. */
  | 'unsupported_encoding'
  /** ENOSPC or EDQUOT while writing the partial file. */
  | 'disk_full'
  /** Any other error of the file system. */
  | 'file_error'
  /** `<id>.gguf` already exists; it is never overwritten. */
  | 'target_exists'
  /** The first bytes are not the GGUF magic. */
  | 'not_gguf'
  /** The complete file failed the caller's validation. */
  | 'invalid_model_file'
  /** The complete file's SHA-256 is not the expected digest. */
  | 'digest_mismatch';

const CODE_OF: Record<DownloadFailureReason, TaskErrorCode> = {
  connection_failed: 'download_failed',
  connection_lost: 'download_failed',
  timeout: 'download_failed',
  http_status: 'download_failed',
  length_mismatch: 'download_failed',
  range_unusable: 'download_failed',
  redirect_refused: 'download_failed',
  too_many_redirects: 'download_failed',
  invalid_response: 'download_failed',
  unsupported_encoding: 'download_failed',
  disk_full: 'download_failed',
  file_error: 'download_failed',
  target_exists: 'download_failed',
  not_gguf: 'invalid_model_file',
  invalid_model_file: 'invalid_model_file',
  digest_mismatch: 'model_digest_mismatch',
};

export class DownloadError extends Error {
  override name = 'DownloadError';
  readonly code: TaskErrorCode;
  readonly reason: DownloadFailureReason;
  /** True when a later attempt can continue from the partial file, which was kept. */
  readonly resumable: boolean;
  /** The HTTP status, for `http_status`. */
  readonly status: number | null;
  /** How long the server asked to be left alone before the next try (`Retry-After`), in ms. */
  readonly retryAfterMs: number | null;

  constructor(reason: DownloadFailureReason, message: string,
    options: { resumable?: boolean; status?: number; retryAfterMs?: number | null; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.reason = reason;
    this.code = CODE_OF[reason];
    this.resumable = options.resumable ?? false;
    this.status = options.status ?? null;
    this.retryAfterMs = options.retryAfterMs ?? null;
  }
}

/** The caller's AbortSignal stopped the download; the partial file is kept for a resume. */
export class DownloadAbortedError extends Error {
  override name = 'AbortError';
  /** Bytes of the partial file on disk when the download stopped. */
  readonly partialBytes: number;

  constructor(partialBytes: number, cause?: unknown) {
    super('the download was aborted', cause === undefined ? undefined : { cause });
    this.partialBytes = partialBytes;
  }
}

/** 408, 429 and 5xx are transient by HTTP's own definition; any other status will come back. */
export function isTransientStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/** A URL fit for messages and logs: signed query strings (CDN redirects) carry secrets. */
export function describeUrl(url: string | URL): string {
  const parsed = typeof url === 'string' ? new URL(url) : url;
  return `${parsed.origin}${parsed.pathname}`;
}

/** `Retry-After` (RFC 9110 10.2.3: seconds, or an HTTP date) in milliseconds from `now`; null when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now = Date.now()): number | null {
  const text = value?.trim();
  if (!text) return null;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}
