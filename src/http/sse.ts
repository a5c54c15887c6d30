/**
 * Server-sent events (LMSP 7.3): frames `id: <sequence_number>`, `event: <type>`, `data: <json>`;
 * a comment line every heartbeat interval; the caller ends the stream after the terminal event.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { sseFrame } from '../api/events.js';
import type { LoggedEvent } from '../domain/tasks.js';

export class EventStream {
  private readonly heartbeat: NodeJS.Timeout;
  private readonly abort = new AbortController();

  constructor(private readonly reply: FastifyReply, heartbeatMs: number, headers: Record<string, string> = {}) {
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...headers,
    });
    raw.flushHeaders();
    this.heartbeat = setInterval(() => {
      if (!raw.writableEnded) raw.write(': keep-alive\n\n');
    }, heartbeatMs);
    raw.on('close', () => {
      clearInterval(this.heartbeat);
      this.abort.abort();
    });
  }

  /** Aborted when the client goes away. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Whether the client left before the stream was ended by us. */
  get clientGone(): boolean {
    return this.abort.signal.aborted && !this.reply.raw.writableFinished;
  }

  async send(events: LoggedEvent[]): Promise<void> {
    const raw = this.reply.raw;
    if (raw.writableEnded || raw.destroyed) return;
    const frames = events.map(sseFrame).join('');
    await writeFrames(raw, frames);
  }

  end(): void {
    clearInterval(this.heartbeat);
    if (!this.reply.raw.writableEnded) this.reply.raw.end();
  }
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
