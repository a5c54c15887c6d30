/**
 * The HTTP side of a model download: one GET on a connection of its own, following redirects by
 * hand so that the bearer token goes to its own origin only (LMSP 5.1: `HF_TOKEN` to the
 * endpoint, never to the CDN it redirects to), plus the parsing of `Content-Range`.
 *
 * On net/tls sockets that read into one reused buffer (`onread`), parsed by the strict parser of
 * http-response-parser.ts, rather than on node:http, undici or fetch: those hand every read over
 * in a freshly allocated buffer through a stream, and on a loopback pull that alone took more
 * CPU time than hashing and writing the file together (bench/pull.ts measures all three). The
 * body reaches the caller as views of the read buffer, which it copies into its write blocks.
 */
import net from 'node:net';
import tls from 'node:tls';
import { SOFTWARE_VERSION } from '../paths.js';
import { DownloadError, describeUrl } from './download-errors.js';
import { HttpParseError, ResponseParser, type ResponseHead, type ResponseHeaders } from './http-response-parser.js';

export type { ResponseHeaders } from './http-response-parser.js';

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** TLS failures will not go away by trying again; other connection failures may. */
const TLS_ERROR = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/;
/** One read of the socket at most; reused for every read of a connection. */
const READ_BUFFER_BYTES = 1 << 20;
/**
 * After the last byte of a body, how long the server has to close the connection (the request
 * says `Connection: close`) before the body is taken as it is: bytes that come in the meantime
 * are more than the server declared.
 */
const CLOSE_GRACE_MS = 1000;

export interface BearerToken {
  /** The one origin (`scheme://host:port`) that may receive the token. */
  origin: string;
  token: string;
}

export interface OpenOptions {
  headers: Record<string, string>;
  bearer: BearerToken | null;
  signal: AbortSignal;
  /** The connection is dropped after this long without a byte while waiting for the server. */
  idleTimeoutMs: number;
  maxRedirects?: number;
  /** Certificates trusted for https instead of the system's (tests serve https with their own). */
  ca?: string | Buffer;
}

/** Receives body bytes `buffer[start, end)`: a view valid only during the call. */
export type BodyChunkHandler = (buffer: Buffer, start: number, end: number) => void;

export interface OpenedResponse {
  /** Where the body comes from, after redirects. */
  url: URL;
  status: number;
  statusMessage: string;
  headers: ResponseHeaders;
  /**
   * Hands the body to `onChunk`, the bytes that came with the head first; resolves once it is
   * whole. Rejects with what `onChunk` threw, with a DownloadError for an answer that broke
   * HTTP (`length_mismatch` for bytes past the declared length, `invalid_response`), or with
   * the connection's own error when it was lost, timed out or aborted.
   */
  readBody(onChunk: BodyChunkHandler): Promise<void>;
  /** Stops reading the socket until `resume` (the disk is behind). */
  pause(): void;
  resume(): void;
  /** The error of the idle timeout when it dropped the connection (it says how long it waited); null otherwise. */
  timeoutError(): DownloadError | null;
  /** Drops the connection (the body is not wanted, or no longer). */
  discard(): void;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  promise.catch(() => undefined); // settled by whoever waits; never an unhandled rejection
  return { promise, resolve, reject };
}

function connectionError(url: URL, error: NodeJS.ErrnoException): DownloadError {
  const code = error.code ?? '';
  const tls = TLS_ERROR.test(code);
  return new DownloadError('connection_failed', `could not fetch ${describeUrl(url)}: ${code || error.message}`, { resumable: !tls, cause: error });
}

function invalidResponse(url: URL, error: HttpParseError): DownloadError {
  return new DownloadError('invalid_response', `${describeUrl(url)} sent an answer that is not valid HTTP/1.1: ${error.message}`, { cause: error });
}

/** The request's head; a CR or LF in a value (a validator recorded from a server) is refused. */
function requestHead(url: URL, headers: Record<string, string>): string {
  const lines = [`GET ${url.pathname}${url.search} HTTP/1.1`, `host: ${url.host}`];
  for (const [name, value] of Object.entries(headers)) {
    if (/[\r\n]/.test(value)) throw new DownloadError('invalid_response', `the ${name} header for ${describeUrl(url)} would contain a line break`);
    lines.push(`${name}: ${value}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** One GET on one connection: the head, then the body on demand. */
class Exchange {
  readonly head = deferred<ResponseHead>();
  private readonly socket: net.Socket;
  private readonly parser: ResponseParser;
  /** Body bytes that came with the head, copied out of the read buffer before its next read. */
  private readonly early: Buffer[] = [];
  private onChunk: BodyChunkHandler | null = null;
  private body: Deferred<void> | null = null;
  private failure: { error: unknown } | null = null;
  private timedOut: DownloadError | null = null;
  private pausedByReader = false;
  private serverClosed = false;
  private graceTimer: NodeJS.Timeout | null = null;
  /**
   * The final head must come within the idle timeout of the request: interim (1xx) answers are
   * bytes that keep the idle timeout from firing, and a server that sent them without end would
   * hold the pull, and its slot, for as long as it liked.
   */
  private headTimer: NodeJS.Timeout | null = null;
  private readonly onAbort = () => this.fail(this.signal.reason);

  constructor(private readonly url: URL, headers: Record<string, string>, private readonly signal: AbortSignal, private readonly idleTimeoutMs: number, ca: string | Buffer | undefined) {
    this.parser = new ResponseParser({
      onHead: (head) => {
        if (this.headTimer) clearTimeout(this.headTimer);
        // Nothing more is read until the caller is ready for the body.
        this.hold();
        this.head.resolve(head);
      },
      onBody: (buffer, start, end) => {
        if (this.onChunk) this.onChunk(buffer, start, end);
        else this.early.push(Buffer.from(buffer.subarray(start, end)));
      },
      onEnd: () => undefined,
    });
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const secure = url.protocol === 'https:';
    const port = Number(url.port) || (secure ? 443 : 80);
    const onread = { buffer: Buffer.allocUnsafe(READ_BUFFER_BYTES), callback: (bytes: number, buffer: Uint8Array) => this.received(buffer as Buffer, bytes) };
    this.socket = secure
      ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host, ALPNProtocols: ['http/1.1'], ca, onread } as tls.ConnectionOptions)
      : net.connect({ host, port, onread });
    this.socket.setTimeout(idleTimeoutMs);
    this.socket.on('timeout', () => {
      this.timedOut = new DownloadError('timeout', `no data from ${describeUrl(url)} for ${idleTimeoutMs} ms`, { resumable: true });
      this.fail(this.timedOut);
    });
    // A reset after the whole body (a server that closes hard) loses nothing.
    this.socket.on('error', (error) => (this.parser.ended ? this.closedByServer() : this.fail(error)));
    this.socket.on('end', () => this.closedByServer());
    this.socket.on('close', () => this.closedByServer());
    if (signal.aborted) this.onAbort();
    else signal.addEventListener('abort', this.onAbort, { once: true });
    if (!this.failure) {
      this.socket.write(requestHead(url, headers));
      this.headTimer = setTimeout(() => {
        this.timedOut = new DownloadError('timeout', `no final answer from ${describeUrl(url)} within ${idleTimeoutMs} ms (interim 1xx answers do not count)`, { resumable: true });
        this.fail(this.timedOut);
      }, idleTimeoutMs);
    }
  }

  private received(buffer: Buffer, bytes: number): boolean {
    if (this.failure) return false;
    try {
      this.parser.feed(buffer, 0, bytes);
    } catch (error) {
      this.fail(error);
      return false;
    }
    if (this.parser.ended && this.onChunk) this.bodyEnded();
    // false would pause the socket; pauses are explicit (head received, disk behind).
    return true;
  }

  /** The server closed its side: the end of a close-delimited body, or of the connection too early. */
  private closedByServer(): void {
    if (this.failure) return;
    try {
      this.parser.finish();
    } catch (error) {
      this.fail(error);
      return;
    }
    if (!this.parser.ended) {
      this.fail(new Error('the connection closed before the answer ended'));
      return;
    }
    // A whole body read before the caller asked for it waits for readBody.
    this.serverClosed = true;
    if (this.onChunk) this.settle();
  }

  /**
   * The last byte of the body arrived: wait a moment for the server to close, so that an overrun
   * is seen. No byte is awaited any more, so the idle timeout stops: the grace bounds the wait.
   */
  private bodyEnded(): void {
    if (this.serverClosed) this.settle();
    else if (!this.graceTimer) {
      this.socket.setTimeout(0);
      this.socket.resume();
      this.graceTimer = setTimeout(() => this.settle(), CLOSE_GRACE_MS);
    }
  }

  private settle(): void {
    if (this.failure) return;
    this.failure = { error: null };
    this.cleanUp();
    this.body?.resolve();
  }

  fail(error: unknown): void {
    if (this.failure) return;
    this.failure = { error };
    this.cleanUp();
    this.head.reject(error);
    this.body?.reject(error);
  }

  private cleanUp(): void {
    if (this.graceTimer) clearTimeout(this.graceTimer);
    if (this.headTimer) clearTimeout(this.headTimer);
    this.signal.removeEventListener('abort', this.onAbort);
    this.socket.destroy();
  }

  readBody(onChunk: BodyChunkHandler): Promise<void> {
    const body = (this.body = deferred<void>());
    if (this.failure) {
      if (this.failure.error === null) throw new Error('the body was already read');
      return Promise.reject(this.failure.error);
    }
    this.onChunk = onChunk;
    try {
      for (const chunk of this.early.splice(0)) onChunk(chunk, 0, chunk.length);
    } catch (error) {
      this.fail(error);
      return body.promise;
    }
    if (this.parser.ended) this.bodyEnded();
    else if (!this.pausedByReader) this.release();
    return body.promise;
  }

  pause(): void {
    this.pausedByReader = true;
    this.hold();
  }

  resume(): void {
    this.pausedByReader = false;
    if (!this.failure) this.release();
  }

  /**
   * Stops reading. The idle timeout waits for the server only: while this side holds the
   * socket (re-hashing a long partial file, a slow disk) it does not run.
   */
  private hold(): void {
    this.socket.pause();
    this.socket.setTimeout(0);
  }

  private release(): void {
    this.socket.setTimeout(this.idleTimeoutMs);
    this.socket.resume();
  }

  timeoutError(): DownloadError | null {
    return this.timedOut;
  }

  discard(): void {
    this.fail(new Error('the answer was discarded'));
  }

  /** What a failure of the body means for the download. */
  bodyFailure(error: unknown): unknown {
    if (!(error instanceof HttpParseError) || error.reason === 'incomplete') return error;
    if (error.reason === 'excess_data') return new DownloadError('length_mismatch', `${describeUrl(this.url)} sent more bytes than its Content-Length`, { cause: error });
    return invalidResponse(this.url, error);
  }
}

async function sendOnce(url: URL, headers: Record<string, string>, options: OpenOptions): Promise<OpenedResponse> {
  const exchange = new Exchange(url, headers, options.signal, options.idleTimeoutMs, options.ca);
  let head: ResponseHead;
  try {
    head = await exchange.head.promise;
  } catch (error) {
    if (error instanceof DownloadError || options.signal.aborted) throw error;
    // A connection closed before the head was whole is a dropped connection, as a reset is;
    // only what breaks the grammar is final.
    if (error instanceof HttpParseError && error.reason !== 'incomplete') throw invalidResponse(url, error);
    throw connectionError(url, error as NodeJS.ErrnoException);
  }
  return {
    url, status: head.status, statusMessage: head.statusMessage, headers: head.headers,
    readBody: (onChunk) => exchange.readBody(onChunk).catch((error: unknown) => {
      throw exchange.bodyFailure(error);
    }),
    pause: () => exchange.pause(),
    resume: () => exchange.resume(),
    timeoutError: () => exchange.timeoutError(),
    discard: () => exchange.discard(),
  };
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
      connection: 'close',
      ...options.headers,
      ...(bearer ? { authorization: `Bearer ${bearer.token}` } : {}),
    };
    const opened = await sendOnce(url, headers, options);
    const location = opened.headers.location;
    if (!REDIRECT_STATUSES.has(opened.status) || location === undefined) return opened;
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
