/**
 * The HTTP side of a model download: one GET, following redirects by hand so that the bearer
 * token goes to its own origin only (LMSP 5.1: `HF_TOKEN` to the endpoint, never to the CDN it
 * redirects to), plus the parsing of `Content-Range`.
 *
 * node:http rather than fetch: it streams into the file without Web Stream adapters, exposes the
 * parse error Node raises when a server sends more bytes than its Content-Length, and lets the
 * redirect loop decide per hop which headers travel.
 */
import http from 'node:http';
import https from 'node:https';
import { SOFTWARE_VERSION } from '../paths.js';
import { DownloadError, describeUrl } from './download-errors.js';

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** TLS failures will not go away by trying again; other connection failures may. */
const TLS_ERROR = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/;

export interface BearerToken {
  /** The one origin (`scheme://host:port`) that may receive the token. */
  origin: string;
  token: string;
}

export interface OpenOptions {
  headers: Record<string, string>;
  bearer: BearerToken | null;
  signal: AbortSignal;
  /** The connection is dropped after this long without a byte. */
  idleTimeoutMs: number;
  maxRedirects?: number;
}

export interface OpenedResponse {
  response: http.IncomingMessage;
  /** Where the body comes from, after redirects. */
  url: URL;
  /**
   * Settles when the request is closed, with the error Node raised after the body if any: a
   * server that sends more bytes than its Content-Length gets a parse error here.
   */
  closed: Promise<Error | null>;
  /** The error of the idle timeout when it dropped the connection (it says how long it waited); null otherwise. */
  timeoutError(): DownloadError | null;
  /** Drops the connection (the body is not wanted). */
  discard(): void;
  /**
   * The chunks of the body that arrived before the caller was ready for them; the response is
   * left paused. Read from the start, they survive a connection that drops in the meantime (a
   * destroyed response discards what it buffered).
   */
  takeEarlyChunks(): Buffer[];
}

/** The most of a body held before its reader is ready; the socket is paused beyond it. */
const EARLY_BYTES = 1 << 20;

function holdEarlyChunks(response: http.IncomingMessage): () => Buffer[] {
  const held: Buffer[] = [];
  let bytes = 0;
  const onData = (chunk: Buffer) => {
    held.push(chunk);
    bytes += chunk.length;
    if (bytes >= EARLY_BYTES) response.pause();
  };
  response.on('data', onData);
  return () => {
    response.off('data', onData);
    response.pause();
    return held.splice(0);
  };
}

function connectionError(url: URL, error: NodeJS.ErrnoException): DownloadError {
  const code = error.code ?? '';
  const tls = TLS_ERROR.test(code);
  return new DownloadError('connection_failed', `could not fetch ${describeUrl(url)}: ${code || error.message}`, { resumable: !tls, cause: error });
}

function sendOnce(url: URL, headers: Record<string, string>, options: OpenOptions): Promise<Omit<OpenedResponse, 'url'>> {
  const client = url.protocol === 'https:' ? https : http;
  // A connection of its own (agent: false): nothing is left pooled, and a body that overruns
  // its Content-Length is reported instead of being read as the start of a next response.
  const request = client.request(url, { method: 'GET', headers, agent: false, signal: options.signal });
  let timedOut: DownloadError | null = null;
  let lateError: Error | null = null;
  const closed = new Promise<Error | null>((resolve) => request.once('close', () => resolve(lateError)));
  request.setTimeout(options.idleTimeoutMs, () => {
    timedOut = new DownloadError('timeout', `no data from ${describeUrl(url)} for ${options.idleTimeoutMs} ms`, { resumable: true });
    request.destroy(timedOut);
  });
  return new Promise((resolve, reject) => {
    request.on('error', (error: NodeJS.ErrnoException) => {
      lateError ??= error;
      if (error instanceof DownloadError || options.signal.aborted) reject(error);
      else reject(connectionError(url, error));
    });
    request.once('response', (response) => {
      resolve({ response, closed, timeoutError: () => timedOut, discard: () => request.destroy(), takeEarlyChunks: holdEarlyChunks(response) });
    });
    request.end();
  });
}

/** Where a redirect may lead: https anywhere; plain http only from plain http (no downgrade). */
export function isRedirectAllowed(from: URL, to: URL): boolean {
  return to.protocol === 'https:' || (to.protocol === 'http:' && from.protocol === 'http:');
}

/** Sends the GET and follows redirects; resolves with the first non-redirect answer. */
export async function openDownload(start: string, options: OpenOptions): Promise<OpenedResponse> {
  const maxRedirects = options.maxRedirects ?? 10;
  let url = new URL(start);
  // LMSP 5.1: once a redirect has left the token's origin, the token stays behind for good.
  let bearer = options.bearer;
  for (let hop = 0; ; hop++) {
    if (bearer && url.origin !== bearer.origin) bearer = null;
    const headers: Record<string, string> = {
      'user-agent': `lmsp/${SOFTWARE_VERSION}`,
      accept: '*/*',
      'accept-encoding': 'identity',
      ...options.headers,
      ...(bearer ? { authorization: `Bearer ${bearer.token}` } : {}),
    };
    const opened = await sendOnce(url, headers, options);
    const { response } = opened;
    const location = response.headers.location;
    if (!REDIRECT_STATUSES.has(response.statusCode ?? 0) || location === undefined) return { ...opened, url };
    opened.discard();
    if (hop >= maxRedirects) throw new DownloadError('too_many_redirects', `more than ${maxRedirects} redirects from ${describeUrl(start)}`);
    let next: URL;
    try {
      next = new URL(location, url);
    } catch {
      throw new DownloadError('redirect_refused', `${describeUrl(url)} redirected to an invalid location`);
    }
    if (!isRedirectAllowed(url, next)) {
      throw new DownloadError('redirect_refused', `refused a redirect from ${describeUrl(url)} to a ${next.protocol} URL`);
    }
    url = next;
  }
}

export interface ContentRange {
  start: number;
  end: number;
  /** null for `*` (unknown). */
  total: number | null;
}

function safeInteger(text: string): number | null {
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : null;
}

/** `bytes START-END/TOTAL` (RFC 9110 14.4); null when malformed or inconsistent. */
export function parseContentRange(header: string | undefined): ContentRange | null {
  const match = /^bytes (\d+)-(\d+)\/(\d+|\*)$/i.exec(header?.trim() ?? '');
  if (!match) return null;
  const start = safeInteger(match[1]!);
  const end = safeInteger(match[2]!);
  const total = match[3] === '*' ? null : safeInteger(match[3]!);
  if (start === null || end === null || end < start || (match[3] !== '*' && (total === null || end >= total))) return null;
  return { start, end, total };
}

/** The complete length a 416 names: `bytes * /TOTAL` (RFC 9110 15.5.17); null when absent. */
export function parseUnsatisfiedRange(header: string | undefined): number | null {
  const match = /^bytes \*\/(\d+)$/i.exec(header?.trim() ?? '');
  return match ? safeInteger(match[1]!) : null;
}
