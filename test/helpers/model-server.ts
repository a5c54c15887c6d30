/**
 * An HTTP server of model files on 127.0.0.1, started inside the test process, for the tests of
 * model pulls (and the task and dashboard tests built on them). It serves files with
 * Content-Length, ETag and Range support, also under the Hugging Face layout
 * `/OWNER/REPO/resolve/REVISION/FILE` (point `LMSP_HF_ENDPOINT` at `server.url`), and logs every
 * request with its Range, If-Range and Authorization headers.
 *
 * Answers are written by hand on the socket (always `Connection: close`), so that a behaviour
 * can break HTTP the way real servers and networks do: drop the connection halfway, declare a
 * length other than the one sent, ignore ranges, answer another range, throttle, redirect.
 */
import { createHash } from 'node:crypto';
import { createReadStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeGgufFile } from '../../src/engine/gguf-writer.js';
import { buildSyntheticModel, LMSP_TINY } from '../../src/engine/synthetic-model.js';

/** How one answer misbehaves; every field is optional, an empty object is a correct answer. */
export interface ServeBehaviour {
  /** Answer this status with a short text body instead of the file. */
  status?: number;
  /** With `status`: this `Retry-After`. */
  retryAfter?: string;
  /** Answer 302 to this URL. */
  redirectTo?: string;
  /** Answer ranges with the whole file (200), as servers without range support do. */
  ignoreRange?: boolean;
  /** Answer a range as if If-Range matched, whatever it says (servers that ignore If-Range). */
  ignoreIfRange?: boolean;
  /** Answer a range request from this offset instead of the one asked. */
  rangeStartOverride?: number;
  /** Put this total in Content-Range instead of the true size. */
  contentRangeTotal?: number;
  /** Serve at most this many bytes of a range (servers that cap ranges). */
  maxRangeBytes?: number;
  /** Send this Content-Length instead of the length of the body that follows. */
  declaredLength?: number;
  /** Send the body without a length (chunked transfer encoding). */
  chunked?: boolean;
  /** Add these bytes after the body (a body longer than declared, with `chunked`). */
  extraBytes?: number;
  /** Send this many body bytes, then drop the connection. */
  dropAfterBytes?: number;
  /** Send this many body bytes, then nothing more, keeping the connection open. */
  stallAfterBytes?: number;
  /** Leave out the last bytes of the body while declaring all of them, then end the answer. */
  omitBytes?: number;
  /** Send the body at about this rate. */
  bytesPerSecond?: number;
  /** Serve these bytes instead of the file (same length or not). */
  replaceBody?: Buffer;
}

export interface LoggedRequest {
  /** When its head arrived (Date.now()). */
  receivedAt: number;
  method: string;
  path: string;
  range: string | null;
  ifRange: string | null;
  authorization: string | null;
  status: number;
  /** Body bytes handed to the socket. */
  bodyBytesSent: number;
  /** True once the whole answer was written; false when the client left first or it was dropped. */
  completed: boolean;
}

type Body = Buffer | { path: string; size: number };

interface Route {
  body: Body;
  etag: string | null;
  lastModified: string | null;
  behaviour: ServeBehaviour;
  queue: ServeBehaviour[];
}

export interface ModelServer {
  /** `http://127.0.0.1:PORT`, usable as `LMSP_HF_ENDPOINT`. */
  url: string;
  requests: LoggedRequest[];
  /** Serves bytes (or a file on disk) at a path; answers the path's full URL. */
  serve(path: string, body: Body, options?: { etag?: string | null; lastModified?: string | null }): string;
  /** Serves a file under `/OWNER/REPO/resolve/REVISION/FILE`; answers the `hf:` source naming it. */
  serveHf(ref: { owner: string; repo: string; file: string; revision?: string }, body: Body, options?: { etag?: string | null }): string;
  /** The behaviour of every later answer at this path. */
  behave(path: string, behaviour: ServeBehaviour): void;
  /** The behaviour of the next answer at this path only (queued, first in first out). */
  behaveOnce(path: string, behaviour: ServeBehaviour): void;
  /** Requests made to a path, in order. */
  requestsTo(path: string): LoggedRequest[];
  close(): Promise<void>;
}

let tinyBytes: Buffer | null = null;

/** The bytes of the built-in model, a real GGUF file of about 460 KiB. */
export function tinyModelBytes(): Buffer {
  if (!tinyBytes) {
    const folder = mkdtempSync(join(tmpdir(), 'lmsp-tiny-'));
    try {
      writeGgufFile(join(folder, 'tiny.gguf'), buildSyntheticModel(LMSP_TINY));
      tinyBytes = readFileSync(join(folder, 'tiny.gguf'));
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  }
  return tinyBytes;
}

function sizeOf(body: Body): number {
  return Buffer.isBuffer(body) ? body.length : body.size;
}

/** `bytes=START-` or `bytes=START-END`; other forms are ignored as a plain server would. */
function parseRange(header: string | undefined): { start: number; end: number | null } | null {
  const match = /^bytes=(\d+)-(\d*)$/.exec(header ?? '');
  if (!match) return null;
  return { start: Number(match[1]), end: match[2] ? Number(match[2]) : null };
}

function write(socket: Socket, data: Buffer | string): Promise<boolean> {
  if (socket.destroyed) return Promise.resolve(false);
  if (socket.write(data)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      socket.off('drain', onDrain);
      socket.off('close', onClose);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    socket.on('drain', onDrain);
    socket.on('close', onClose);
  });
}

async function* bodyChunks(body: Body, start: number, end: number, chunkBytes: number): AsyncGenerator<Buffer> {
  if (end < start) return;
  if (Buffer.isBuffer(body)) {
    for (let offset = start; offset <= end; offset += chunkBytes) yield body.subarray(offset, Math.min(end + 1, offset + chunkBytes));
    return;
  }
  for await (const chunk of createReadStream(body.path, { start, end, highWaterMark: chunkBytes })) yield chunk as Buffer;
}

function head(status: number, reason: string, headers: Record<string, string | number>): string {
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`);
  return [`HTTP/1.1 ${status} ${reason}`, ...lines, 'Connection: close', '', ''].join('\r\n');
}

const REASONS: Record<number, string> = { 200: 'OK', 206: 'Partial Content', 302: 'Found', 404: 'Not Found', 416: 'Range Not Satisfiable', 500: 'Internal Server Error' };

/**
 * A self-signed certificate for `localhost` and `127.0.0.1`, valid for a century, made for these
 * tests only (its key is public): trust it with `trustedCertificates`.
 */
export function testCertificate(): { key: Buffer; cert: Buffer } {
  // From dist/test/helpers/ back to the repository's test/fixtures/.
  const folder = new URL('../../../test/fixtures/tls/', import.meta.url);
  return { key: readFileSync(new URL('localhost.key', folder)), cert: readFileSync(new URL('localhost.crt', folder)) };
}

/** Serves over https with the test certificate when `https` is true. */
export async function startModelServer(options: { https?: boolean } = {}): Promise<ModelServer> {
  const routes = new Map<string, Route>();
  const requests: LoggedRequest[] = [];
  const sockets = new Set<Socket>();

  async function answer(request: IncomingMessage, entry: LoggedRequest): Promise<void> {
    const socket = request.socket;
    const send = async (status: number, headers: Record<string, string | number>, text = '') => {
      entry.status = status;
      await write(socket, head(status, REASONS[status] ?? 'Status', { 'Content-Length': Buffer.byteLength(text), ...headers }) + text);
      entry.completed = !socket.destroyed;
      socket.end();
    };
    const route = routes.get(entry.path);
    if (!route) return send(404, { 'Content-Type': 'text/plain' }, 'not found');
    const behaviour = route.queue.shift() ?? route.behaviour;
    if (behaviour.redirectTo) return send(302, { Location: behaviour.redirectTo });
    if (behaviour.status) {
      return send(behaviour.status, { 'Content-Type': 'text/plain', ...(behaviour.retryAfter ? { 'Retry-After': behaviour.retryAfter } : {}) }, `status ${behaviour.status}`);
    }

    const body: Body = behaviour.replaceBody ?? route.body;
    const size = sizeOf(body);
    const range = parseRange(request.headers.range);
    const ifRange = request.headers['if-range'] as string | undefined;
    const rangeApplies = range !== null && !behaviour.ignoreRange && (ifRange === undefined || behaviour.ignoreIfRange === true || ifRange === route.etag || ifRange === route.lastModified);
    const headers: Record<string, string | number> = { 'Content-Type': 'application/octet-stream', 'Accept-Ranges': 'bytes' };
    if (route.etag) headers.ETag = route.etag;
    if (route.lastModified) headers['Last-Modified'] = route.lastModified;
    headers.Date = new Date().toUTCString();
    let status = 200;
    let start = 0;
    let end = size - 1;
    if (rangeApplies) {
      start = behaviour.rangeStartOverride ?? range.start;
      if (start >= size) return send(416, { 'Content-Range': `bytes */${size}` });
      end = Math.min(range.end ?? size - 1, size - 1);
      if (behaviour.maxRangeBytes !== undefined) end = Math.min(end, start + behaviour.maxRangeBytes - 1);
      status = 206;
      headers['Content-Range'] = `bytes ${start}-${end}/${behaviour.contentRangeTotal ?? size}`;
    }
    const length = end - start + 1;
    const sentEnd = end - (behaviour.omitBytes ?? 0);
    if (behaviour.chunked) headers['Transfer-Encoding'] = 'chunked';
    else headers['Content-Length'] = behaviour.declaredLength ?? length;
    entry.status = status;
    if (!(await write(socket, head(status, REASONS[status]!, headers)))) return;

    const chunkBytes = behaviour.bytesPerSecond ? Math.max(1024, Math.floor(behaviour.bytesPerSecond / 20)) : 1 << 20;
    const limit = behaviour.dropAfterBytes ?? behaviour.stallAfterBytes ?? Infinity;
    const extra = Buffer.alloc(behaviour.extraBytes ?? 0, 0x5a);
    const paced = behaviour.bytesPerSecond ? (bytes: number) => new Promise((resolve) => setTimeout(resolve, (bytes / behaviour.bytesPerSecond!) * 1000)) : null;
    const all = async function* () {
      yield* bodyChunks(body, start, sentEnd, chunkBytes);
      if (extra.length > 0) yield extra;
    };
    for await (const whole of all()) {
      const chunk = whole.subarray(0, Math.max(0, limit - entry.bodyBytesSent));
      if (chunk.length > 0) {
        const framed = behaviour.chunked ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]) : chunk;
        if (!(await write(socket, framed))) return;
        entry.bodyBytesSent += chunk.length;
      }
      if (entry.bodyBytesSent >= limit) {
        // Everything written reaches the client before the connection drops or goes quiet.
        await new Promise((resolve) => socket.write(Buffer.alloc(0), resolve));
        if (behaviour.dropAfterBytes !== undefined) socket.destroy();
        return;
      }
      if (paced) await paced(chunk.length);
      if (socket.destroyed) return;
    }
    if (behaviour.chunked && !(await write(socket, '0\r\n\r\n'))) return;
    await new Promise<void>((resolve) => socket.end(resolve));
    entry.completed = true;
  }

  const onRequest = (request: IncomingMessage) => {
    const path = decodeURIComponent(new URL(request.url ?? '/', 'http://localhost').pathname);
    const entry: LoggedRequest = {
      receivedAt: Date.now(),
      method: request.method ?? 'GET',
      path,
      range: request.headers.range ?? null,
      ifRange: (request.headers['if-range'] as string | undefined) ?? null,
      authorization: request.headers.authorization ?? null,
      status: 0,
      bodyBytesSent: 0,
      completed: false,
    };
    requests.push(entry);
    answer(request, entry).catch(() => request.socket.destroy());
  };
  const server: Server = options.https ? createTlsServer(testCertificate(), onRequest) : createServer(onRequest);
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `${options.https ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const serve: ModelServer['serve'] = (path, body, options = {}) => {
    const etag = options.etag === undefined ? `"${sizeOf(body).toString(16)}-${routes.size}"` : options.etag;
    routes.set(path, { body, etag, lastModified: options.lastModified ?? null, behaviour: {}, queue: [] });
    return `${url}${path}`;
  };
  const routeOf = (path: string): Route => {
    const route = routes.get(path);
    if (!route) throw new Error(`nothing is served at ${path}`);
    return route;
  };

  return {
    url,
    requests,
    serve,
    serveHf(ref, body, options) {
      const revision = ref.revision ?? 'main';
      serve(`/${ref.owner}/${ref.repo}/resolve/${revision}/${ref.file}`, body, options);
      return `hf:${ref.owner}/${ref.repo}/${ref.file}${ref.revision ? `@${ref.revision}` : ''}`;
    },
    behave(path, behaviour) {
      routeOf(path).behaviour = behaviour;
    },
    behaveOnce(path, behaviour) {
      routeOf(path).queue.push(behaviour);
    },
    requestsTo(path) {
      return requests.filter((request) => request.path === path);
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `sha256:<hex>` of bytes, as the registry writes digests. */
export function sha256Digest(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}
