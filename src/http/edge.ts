/**
 * The edge of the HTTP server: what is decided before a route runs or where no route can run.
 *
 * - Refusals a client can read (LMSP 2, 9): an answer given before the body was read (413, 415,
 *   401, 421, 403) waits until the client has finished sending it, up to 4x the body limit, so
 *   the client reads the answer instead of a broken pipe; past that bound the connection closes.
 * - Errors of the HTTP parser itself (headers too large, a malformed request line or
 *   Content-Length, a timeout) in the LMSP error shape.
 * - Timeouts chosen on purpose: headers within 10 s and the whole request within 60 s bound a
 *   slow client; an idle kept-alive connection stays open 75 s, longer than the connection
 *   pools of the clients people use keep theirs (undici, and so the `openai` package, 4 s; Node's
 *   http agent 5 s), so a reused connection never meets one the service has just closed.
 * - JSON nested deeper than 64 levels is refused before it is parsed (LMSP section 2).
 * - Open connections are capped (`--max-connections`) below the process's open-file limit: a
 *   neighbour that opens connections by the thousand gets the extra ones closed at once, and
 *   the service keeps the files it needs for itself (its database, its runners, model files).
 *   By default the cap is all the limit leaves, so that it takes as many connections to shut
 *   clients out as it did without one.
 */
import { readFileSync } from 'node:fs';
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { invalidRequest, ServiceError } from '../domain/errors.js';
import { newRequestId } from '../ids.js';

export const HEADERS_TIMEOUT_MS = 10_000;
export const REQUEST_TIMEOUT_MS = 60_000;
export const KEEP_ALIVE_TIMEOUT_MS = 75_000;
/** How often Node checks the two timeouts above: a slow client is cut within a second of them. */
export const TIMEOUT_CHECK_INTERVAL_MS = 1_000;
/** An answer given before the body was read waits for at most this many times the body limit. */
export const DRAIN_FACTOR = 4;
export const MAX_JSON_DEPTH = 64;
/**
 * Open files kept for the service itself beyond its connections: the database and its log (on
 * two connections), the runners' pipes and state files, model files being loaded or pulled.
 */
export const RESERVED_FILES = 256;
/** The fewest connections a cap allows, however low the open-file limit. */
const MIN_CONNECTIONS = 16;
/** A warning about connections closed at the cap is logged at most this often. */
const DROP_WARNING_INTERVAL_MS = 60_000;

/** This process's soft limit on open files, from Linux's `/proc/self/limits`; null where unknown or unlimited. */
export function openFileLimit(limitsFile = '/proc/self/limits'): number | null {
  let text: string;
  try {
    text = readFileSync(limitsFile, 'utf8');
  } catch {
    return null;
  }
  const soft = /^Max open files\s+(\S+)/m.exec(text)?.[1];
  return soft !== undefined && /^\d+$/.test(soft) ? Number(soft) : null;
}

/**
 * The connections to accept: as asked (0: as many as there can be), but no more than the
 * open-file limit leaves beside the reserve; null for no cap (0 asked, and no limit known).
 */
export function connectionCap(wanted: number, openFiles: number | null): number | null {
  if (openFiles === null) return wanted === 0 ? null : wanted;
  const room = Math.max(MIN_CONNECTIONS, openFiles - RESERVED_FILES);
  return wanted === 0 ? room : Math.min(wanted, room);
}

/**
 * Closes a new connection at once while `cap` are open (Node's `maxConnections`), counting each
 * one so closed and warning at most once a minute: a client then sees the connection reset, which
 * the `openai` package and others retry.
 */
export function capConnections(server: Server, cap: number | null, dropped: () => void, warn: (message: string) => void): void {
  if (cap === null) return;
  server.maxConnections = cap;
  let warnedAt = -Infinity;
  server.on('drop', () => {
    dropped();
    const now = performance.now();
    if (now - warnedAt < DROP_WARNING_INTERVAL_MS) return;
    warnedAt = now;
    warn(`a new connection was closed at once: ${cap} are open, the most --max-connections allows`);
  });
}

/**
 * Whether JSON text nests arrays and objects deeper than `max`, found by one pass over the text
 * (strings skipped), so that neither the parser nor anything after it ever recurses that deep.
 */
export function jsonDepthExceeds(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === 0x5c) i += 1; // backslash: skip the escaped character
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) {
      inString = true;
    } else if (code === 0x5b || code === 0x7b) {
      depth += 1;
      if (depth > max) return true;
    } else if (code === 0x5d || code === 0x7d) {
      depth -= 1;
    }
  }
  return false;
}

/** A `\uD800`-`\uDFFF` escape in JSON text: only then can a parsed value hold a lone surrogate. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
const LONE_SURROGATE = /\p{Cs}/u;
const LONE_SURROGATES = /\p{Cs}/gu;

/**
 * Where a parsed JSON body holds a lone surrogate (`"\ud800"` escaped without its pair), as a
 * field path (`input[0].content`), or null. Such a string is no Unicode text: it cannot be
 * written as UTF-8, so it would reach the model and the database as U+FFFD, changed silently.
 * `text` is the body as received; the walk runs only when it holds such an escape.
 */
export function loneSurrogatePath(text: string, value: unknown): string | null {
  if (!SURROGATE_ESCAPE.test(text)) return null;
  const walk = (node: unknown, path: string): string | null => {
    if (typeof node === 'string') return LONE_SURROGATE.test(node) ? path : null;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const found = walk(node[i], `${path}[${i}]`);
        if (found !== null) return found;
      }
      return null;
    }
    if (node === null || typeof node !== 'object') return null;
    for (const [key, child] of Object.entries(node)) {
      // A key at fault is named with its surrogate written as the escape it came as: the answer's
      // `param` must not hold the very character that was refused.
      const shown = key.replace(LONE_SURROGATES, (unit) => `\\u${unit.charCodeAt(0).toString(16)}`);
      const at = path === '' ? shown : `${path}.${shown}`;
      if (shown !== key) return at;
      const found = walk(child, at);
      if (found !== null) return found;
    }
    return null;
  };
  return walk(value, '');
}

/**
 * Reads and discards what is left of a request's body, up to `bound` bytes. Resolves true once
 * the client has sent all of it, false when it sends more than the bound (the connection must
 * then close).
 */
export function drainRequest(raw: IncomingMessage, bound: number): Promise<boolean> {
  if (raw.complete || raw.destroyed || raw.readableEnded) return Promise.resolve(true);
  // A client still waiting for "100 Continue" has not sent its body: the answer goes now, and
  // the connection closes after it, whatever the client does next (RFC 9110 10.1.1).
  if (awaitingContinue.has(raw)) return Promise.resolve(false);
  const declared = Number(raw.headers['content-length']);
  if (Number.isFinite(declared) && declared > bound) return Promise.resolve(false);
  return new Promise((resolve) => {
    let seen = 0;
    const finish = (drained: boolean) => {
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('error', onEnd);
      raw.off('close', onEnd);
      resolve(drained);
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > bound) finish(false);
    };
    const onEnd = () => finish(raw.complete);
    raw.on('data', onData);
    raw.once('end', onEnd);
    raw.once('error', onEnd);
    raw.once('close', onEnd);
    raw.resume();
  });
}

/** Requests that sent `Expect: 100-continue` and have not been told to go on yet. */
const awaitingContinue = new WeakSet<IncomingMessage>();

/** JSON's structured-syntax media types (`application/vnd.api+json`), read as `application/json` is (LMSP 2). */
export const JSON_SUFFIX_MEDIA_TYPE = /^application\/[\w.+-]+\+json$/;

/**
 * Tells a client that sent `Expect: 100-continue` to send its body, now that everything decided
 * from the headers has passed; what the headers refuse is answered instead: a route that does
 * not exist (`noRoute`), a declared body over `bodyLimit` (413), a body that is not JSON (415).
 */
export function continueRequest(raw: IncomingMessage, response: ServerResponse, bodyLimit: number, noRoute: ServiceError | null): void {
  if (!awaitingContinue.has(raw)) return;
  if (noRoute) throw noRoute;
  const declared = Number(raw.headers['content-length']);
  if (Number.isFinite(declared) && declared > bodyLimit) throw new ServiceError('request_too_large');
  const type = raw.headers['content-type']?.split(';')[0]!.trim().toLowerCase() ?? '';
  const body = declared > 0 || raw.headers['transfer-encoding'] !== undefined;
  if (body && type !== 'application/json' && !JSON_SUFFIX_MEDIA_TYPE.test(type)) throw new ServiceError('unsupported_media_type');
  awaitingContinue.delete(raw);
  response.writeContinue();
}

/**
 * RFC 9112 3.2: more than one Host is a 400, or a page could pass one name and be served under
 * another. The error to answer, or null.
 */
export function repeatedHost(raw: IncomingMessage): ServiceError | null {
  return headerCount(raw, 'host') > 1 ? invalidRequest('Host', 'The request has more than one Host header.') : null;
}

/** How many times a header came in the request (Node keeps one of some headers and drops the rest). */
export function headerCount(raw: IncomingMessage, name: string): number {
  return raw.rawHeaders.filter((header, index) => index % 2 === 0 && header.toLowerCase() === name).length;
}

/** An answer written to the socket by hand, named by its own `x-request-id` as every other answer is. */
function rawErrorResponse(error: ServiceError): string {
  const body = JSON.stringify(error.toBody());
  const { status } = error;
  const reason = STATUS_CODES[status] ?? 'Error';
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`
    + `X-Request-Id: ${newRequestId()}\r\nConnection: close\r\n\r\n${body}`;
}

/**
 * Errors of Node's HTTP parser, answered in the LMSP shape (Fastify's default answers in its
 * own). The connection closes after the answer, as Node itself does: the request cannot be
 * read further.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  let response: string;
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    response = rawErrorResponse(new ServiceError('request_header_too_large'));
  } else if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    response = rawErrorResponse(new ServiceError('request_timeout'));
  } else {
    const what = error.code === 'HPE_INVALID_CONTENT_LENGTH' || error.code === 'HPE_UNEXPECTED_CONTENT_LENGTH'
      ? 'The Content-Length header is not valid.'
      : 'The request is not valid HTTP.';
    response = rawErrorResponse(invalidRequest(null, what));
  }
  if (!socket.writable) return void socket.destroy();
  // A request read whole before the bytes that are not HTTP (pipelined) is still being
  // answered: its answer goes first, then this one, then the connection closes. Node's own
  // handler would answer 400 in its place, for a request the service may already have acted on.
  // A request still reading its body is the one the bad bytes belong to: answered as before.
  const current = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
  if (current && !current.writableFinished && current.req.complete) {
    current.once('finish', () => (socket.writable ? socket.end(response) : socket.destroy()));
    current.once('close', () => {
      if (!current.writableFinished) socket.destroy();
    });
    return;
  }
  // As Node does: answer unless a response is already under way on this connection.
  if (!current?.headersSent) socket.end(response);
  else socket.destroy();
}

/**
 * What Node's HTTP server answers by itself, answered in the LMSP shape instead: an `Expect`
 * other than `100-continue` (RFC 9110 10.1.1 lets a server ignore it, so the request goes on to
 * the Host check and its route), and `CONNECT`, which no route serves (Node would close the
 * connection without a word): after the Host check, as every request (LMSP 2): one Host header
 * (else 400), and both it and the target, when the target is an authority (RFC 9112 3.2.3; a
 * client may send a path), names `served` answers to, or 421.
 */
export function answerWhatNodeWouldRefuse(server: Server, served: (authority: string) => boolean): void {
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    server.emit('request', request, response);
  });
  // `Expect: 100-continue`: Node would say "100 Continue" at once, and a client would send a body
  // the checks before it (Host, Origin, token, size) then refuse. The client is told to go on
  // only once those passed (continueRequest), as RFC 9110 10.1.1 asks of a server that can
  // tell from the headers alone.
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    awaitingContinue.add(request);
    server.emit('request', request, response);
  });
  server.on('connect', (request: IncomingMessage, socket: Socket) => {
    socket.on('error', () => socket.destroy());
    const repeated = repeatedHost(request);
    if (repeated) return void socket.end(rawErrorResponse(repeated));
    // Its target when that is an authority, and its Host header, which names the same one.
    const target = request.url ?? '';
    const authorities = [...(target === '' || target.includes('/') ? [] : [target]), request.headers.host ?? ''];
    const refused = authorities.find((authority) => !served(authority));
    socket.end(rawErrorResponse(refused === undefined ? new ServiceError('not_found', `No route for CONNECT ${target}.`)
      : new ServiceError('misdirected_request', `The Host '${refused}' is not served here.`)));
  });
}
