/**
 * Server-sent events (LMSP 7.3): frames `id: <sequence_number>`, `event: <type>`, `data: <json>`;
 * a comment line every heartbeat interval; the caller ends the stream after the terminal event.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { sseFrame } from '../api/events.js';
import type { LoggedEvent } from '../domain/tasks.js';

export class EventStream {
  private readonly abort = new AbortController();
  /** Whether the stream was ended by `close` (the service), not by its client. */
  private closed = false;

  constructor(private readonly reply: FastifyReply, heartbeatMs: number, headers: Record<string, string> = {}) {
    openEventStream(reply, heartbeatMs, headers).on('close', () => this.abort.abort());
  }

  /** Aborted when the client goes away. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Whether the client left before the stream was ended by us. */
  get clientGone(): boolean {
    return this.abort.signal.aborted && !this.closed && !this.reply.raw.writableFinished;
  }

  /** Ends the stream now, whatever it was following: the frames written so far, then the end. */
  close(): void {
    this.closed = true;
    this.abort.abort();
    this.end();
  }

  async send(events: LoggedEvent[]): Promise<void> {
    const raw = this.reply.raw;
    if (raw.writableEnded || raw.destroyed) return;
    const frames = events.map(sseFrame).join('');
    await writeFrames(raw, frames);
  }

  end(): void {
    if (!this.reply.raw.writableEnded) this.reply.raw.end();
  }
}

/**
 * Takes the connection over from Fastify and sends the head of an event stream, then a comment
 * line every `heartbeatMs` until the stream ends, whoever ends it. Headers already set on the
 * reply (the CORS headers of an allowed origin, LMSP 2) go with it: Fastify sends them only with
 * answers it writes itself.
 */
export function openEventStream(reply: FastifyReply, heartbeatMs: number, headers: Record<string, string> = {}): ServerResponse {
  const set: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) set[name] = value;
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    ...set,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    // No Connection header of our own: Node writes keep-alive, or close when the request asked
    // to close (RFC 9112 9.6), and then closes the socket after the stream.
    'x-accel-buffering': 'no',
    ...headers,
  });
  raw.flushHeaders();
  const heartbeat = setInterval(() => {
    if (!raw.writableEnded) raw.write(': keep-alive\n\n');
  }, heartbeatMs);
  const stop = () => clearInterval(heartbeat);
  raw.once('finish', stop);
  raw.once('close', stop);
  return raw;
}

/** Writes frames; when the socket's buffer is full, waits for it to drain (or close) before answering. */
export async function writeFrames(raw: ServerResponse, frames: string): Promise<void> {
  if (raw.write(frames)) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      raw.off('drain', done);
      raw.off('close', done);
      resolve();
    };
    raw.on('drain', done);
    raw.on('close', done);
  });
}
