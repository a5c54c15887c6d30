/** A task's log as a server-sent event stream (LMSP 6, 7.3): the replay, then live, until the terminal event. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import Negotiator from 'negotiator';
import type { Client } from '../domain/clients.js';
import { invalidRequest } from '../domain/errors.js';
import { followTask, type FollowEnd } from '../tasks/follow.js';
import type { AppContext } from './context.js';
import { EventStream } from './sse.js';

/**
 * Streams a task's log after `afterSequence` until its terminal event, and tells whether the
 * client left first. The stream counts against the client's limits (LMSP 16): a caller that must
 * know before doing anything (a streaming create) takes the place itself with `openStream` and
 * passes it in; revoking the client ends the stream (LMSP 4).
 */
export async function streamTaskEvents(context: AppContext, reply: FastifyReply, client: Client, taskId: string,
  afterSequence: number, options: {
    headers?: Record<string, string>;
    place?: () => void;
    /** Runs once the log is followed to its end, before the stream is closed. */
    beforeClose?: (clientGone: boolean) => Promise<void>;
    /**
     * A revoke cuts the connection, as a disconnect would (a create: its task is cancelled as on
     * a disconnect). Without it a revoke ends the stream cleanly: the events sent so far, then
     * the end of the response, which a reconnecting client follows with a 401.
     */
    cutOnRevoke?: boolean;
  } = {}): Promise<{ end: FollowEnd; clientGone: boolean }> {
  const { store, bus } = context.core;
  const release = options.place ?? context.connections.openStream(client.id);
  let stream: EventStream | null = null;
  const unbind = context.connections.bind(client.id, () => (stream && !options.cutOnRevoke ? stream.close() : reply.raw.destroy()));
  try {
    stream = new EventStream(reply, context.heartbeatMs, options.headers ?? {});
    const opened = stream;
    const end = await followTask(store, bus, taskId, afterSequence, opened.signal, (events) => opened.send(events));
    await options.beforeClose?.(opened.clientGone);
    return { end, clientGone: opened.clientGone };
  } finally {
    stream?.end();
    unbind();
    release();
  }
}

const DECIMAL = /^\d+$/;

/**
 * The request's `Last-Event-ID`, null when it has none. One that is not a decimal integer is a
 * 400 on any request (LMSP 2 states it without a condition), not only where a stream reads it.
 */
export function lastEventIdOf(request: FastifyRequest): number | null {
  const header = request.headers['last-event-id'];
  if (header === undefined) return null;
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!DECIMAL.test(value)) throw invalidRequest('Last-Event-ID', 'Last-Event-ID must be a decimal integer (the sequence number of the last event seen).');
  return sequenceNumberOf(value);
}

/**
 * A sequence-number cursor as written (`Last-Event-ID`, `starting_after`: decimal digits only).
 * A number beyond any sequence number (over 2^53) still means "after everything so far".
 */
export function sequenceNumberOf(decimal: string): number {
  return Math.min(Number(decimal), Number.MAX_SAFE_INTEGER);
}

/**
 * Whether the request's `Accept` prefers a server-sent event stream to JSON (LMSP 7.3): media
 * types compared without regard to case, and `q` weights honoured, as HTTP defines them; without
 * `Accept`, or with any type allowed, JSON.
 */
export function wantsEventStream(request: FastifyRequest): boolean {
  return new Negotiator(request).mediaType(['application/json', 'text/event-stream']) === 'text/event-stream';
}

/**
 * Where a stream starts: after the `Last-Event-ID` a reconnecting EventSource names (LMSP 7.3),
 * else after `starting_after` (the query's decimal text).
 */
export function streamStart(request: FastifyRequest, startingAfter: string | undefined): number {
  return lastEventIdOf(request) ?? (startingAfter === undefined ? 0 : sequenceNumberOf(startingAfter));
}
