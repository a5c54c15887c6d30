/**
 * What to do with an answer to a download request (LMSP 5.1, RFC 9110 sections 14 and 15):
 * write its body at some offset of the partial file, accept the partial file as whole, start
 * over from byte 0, or fail. Pure, so every case of a resume is unit-tested without a server.
 */
import { DownloadError, describeUrl, isTransientStatus, retryAfterMs } from './download-errors.js';
import { parseContentRange, parseUnsatisfiedRange, type ResponseHeaders } from './download-http.js';

/** What a later attempt needs to continue a download; the pull task keeps it in its record. */
export interface ResumeState {
  /** The source URL (before redirects); a resume of another URL starts over. */
  url: string;
  /** A strong ETag of the file, sent as If-Range. */
  etag: string | null;
  /** Last-Modified, kept only when it is a strong validator and there is no ETag. */
  lastModified: string | null;
  /** The file's complete size, when the server said it. */
  totalBytes: number | null;
  /**
   * The ETag and Last-Modified exactly as the answer had them, weak or strong (absent in
   * records written before they were kept). A range answer must carry the same ones: a weak
   * ETag cannot be sent as If-Range, and a server may ignore If-Range, so a file that changed
   * shows only here; its bytes must not be appended to the old file's.
   */
  seen?: { etag: string | null; lastModified: string | null };
}

export type BodyPlan =
  /** Append the body at `from` (0: the file starts over); `bodyBytes` null when undeclared. */
  | { kind: 'write'; from: number; bodyBytes: number | null; totalBytes: number | null }
  /** A 416 that names exactly the partial file's size: the file is already whole. */
  | { kind: 'complete'; totalBytes: number }
  /** The range answer cannot be used: ask again for the whole file. */
  | { kind: 'restart'; why: string };

export interface Answer {
  /** Where the request asked the body to start (0: no Range header). */
  requestedFrom: number;
  recorded: ResumeState | null;
  status: number;
  statusMessage: string;
  headers: Readonly<ResponseHeaders>;
  url: URL;
}

function declaredLength(headers: Readonly<ResponseHeaders>): number | null {
  const header = headers['content-length'];
  if (header === undefined || !/^\d+$/.test(header)) return null;
  const value = Number(header);
  return Number.isSafeInteger(value) ? value : null;
}

function lengthMismatch(answer: Answer, why: string): DownloadError {
  return new DownloadError('length_mismatch', `${describeUrl(answer.url)}: ${why}`);
}

function planPartialContent(answer: Answer): BodyPlan {
  const { requestedFrom, recorded, headers } = answer;
  const range = parseContentRange(headers['content-range']);
  if (!range) {
    if (requestedFrom > 0) return { kind: 'restart', why: 'a 206 answer without a usable Content-Range' };
    throw lengthMismatch(answer, 'a 206 answer without a usable Content-Range');
  }
  if (range.start !== requestedFrom) {
    if (requestedFrom > 0) return { kind: 'restart', why: `asked for bytes from ${requestedFrom}, got bytes from ${range.start}` };
    throw lengthMismatch(answer, `asked for the whole file, got bytes from ${range.start}`);
  }
  const unusable = validatorChange(recorded, headers);
  if (unusable) return { kind: 'restart', why: unusable };
  if (recorded?.totalBytes != null && range.total !== null && range.total !== recorded.totalBytes) {
    return { kind: 'restart', why: `the file changed on the server (${range.total} bytes, not ${recorded.totalBytes})` };
  }
  const bodyBytes = range.end - range.start + 1;
  const length = declaredLength(headers);
  if (length !== null && length !== bodyBytes) {
    throw lengthMismatch(answer, `Content-Length ${length} disagrees with Content-Range ${headers['content-range']}`);
  }
  return { kind: 'write', from: range.start, bodyBytes, totalBytes: range.total };
}

/**
 * Why a range answer cannot continue the bytes on disk, judged by its validators: they must be
 * exactly those the bytes came with, an ETag or Last-Modified that appears counting as much as
 * one that changes or goes. Bytes that came with neither cannot be shown to be of the same
 * file, so they are not continued either.
 */
function validatorChange(recorded: ResumeState | null, headers: Readonly<ResponseHeaders>): string | null {
  if (!recorded) return null;
  const changed = (what: string) => `the file changed on the server (${what})`;
  if (!recorded.seen) {
    // A record written before the answer's own validators were kept: its strong ones.
    if (recorded.etag !== null && headers.etag !== recorded.etag) return changed(headers.etag === undefined ? 'no ETag any more' : 'another ETag');
    if (recorded.lastModified !== null && headers['last-modified'] !== recorded.lastModified) {
      return changed(headers['last-modified'] === undefined ? 'no Last-Modified any more' : 'another Last-Modified');
    }
    return null;
  }
  const { etag, lastModified } = recorded.seen;
  if (etag === null && lastModified === null) return 'the server sent neither ETag nor Last-Modified, so nothing shows the file is the same';
  const compare = (name: string, article: string, was: string | null, now: string | undefined): string | null => {
    if ((now ?? null) === was) return null;
    return changed(was === null ? `${article} ${name} it did not have` : now === undefined ? `no ${name} any more` : `another ${name}`);
  };
  return compare('ETag', 'an', etag, headers.etag) ?? compare('Last-Modified', 'a', lastModified, headers['last-modified']);
}

function planUnsatisfiable(answer: Answer): BodyPlan {
  const total = parseUnsatisfiedRange(answer.headers['content-range']);
  if (answer.requestedFrom > 0 && total === answer.requestedFrom) return { kind: 'complete', totalBytes: total };
  if (answer.requestedFrom > 0) {
    return { kind: 'restart', why: total === null ? 'a 416 answer without the file size' : `the file on the server has ${total} bytes` };
  }
  throw new DownloadError('http_status', `${describeUrl(answer.url)} answered 416 to a request for the whole file`, { status: 416 });
}

/** Decides what an answer means for the partial file; throws the failures that end an attempt. */
export function planBody(answer: Answer): BodyPlan {
  const { status } = answer;
  if (status === 200 || status === 206) {
    const encoding = answer.headers['content-encoding'];
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
      throw new DownloadError('unsupported_encoding', `${describeUrl(answer.url)} sent a ${encoding}-encoded body`);
    }
  }
  if (status === 200) {
    // The whole file: a server without ranges, or one whose file changed (If-Range).
    const length = declaredLength(answer.headers);
    return { kind: 'write', from: 0, bodyBytes: length, totalBytes: length };
  }
  if (status === 206) return planPartialContent(answer);
  if (status === 416) return planUnsatisfiable(answer);
  const text = answer.statusMessage ? `${status} ${answer.statusMessage}` : String(status);
  throw new DownloadError('http_status', `${describeUrl(answer.url)} answered ${text}`,
    { status, resumable: isTransientStatus(status), retryAfterMs: retryAfterMs(answer.headers['retry-after']) });
}

/**
 * The validators a resume may send as If-Range (RFC 9110 13.1.5): a strong ETag; else a
 * Last-Modified at least a second older than the answer's Date, which makes it strong.
 */
export function resumeStateOf(url: string, headers: Readonly<ResponseHeaders>, totalBytes: number | null): ResumeState {
  const etag = headers.etag && !headers.etag.startsWith('W/') ? headers.etag : null;
  let lastModified: string | null = null;
  if (!etag && headers['last-modified'] && headers.date) {
    const modified = Date.parse(headers['last-modified']);
    const date = Date.parse(headers.date);
    if (Number.isFinite(modified) && Number.isFinite(date) && date - modified >= 1000) lastModified = headers['last-modified'];
  }
  return { url, etag, lastModified, totalBytes, seen: { etag: headers.etag ?? null, lastModified: headers['last-modified'] ?? null } };
}

/** The If-Range value for a resume, if any. */
export function ifRangeOf(recorded: ResumeState | null): string | null {
  return recorded?.etag ?? recorded?.lastModified ?? null;
}
