/** A task's log as a server-sent event stream (LMSP 6, 7.3): the replay, then live, until the terminal event. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { followTask, type FollowEnd } from '../tasks/follow.js';
import type { AppContext } from './context.js';
import { EventStream } from './sse.js';

/** Streams a task's log after `afterSequence` until its terminal event; tells whether the client left first. */
export async function streamTaskEvents(context: AppContext, reply: FastifyReply, taskId: string, afterSequence: number,
  headers: Record<string, string> = {}): Promise<{ end: FollowEnd; clientGone: boolean }> {
  const { store, bus } = context.core;
  const stream = new EventStream(reply, context.heartbeatMs, headers);
  try {
    const end = await followTask(store, bus, taskId, afterSequence, stream.signal, (events) => stream.send(events));
    return { end, clientGone: stream.clientGone };
  } finally {
    stream.end();
  }
}

/**
 * Where a stream starts: after the `Last-Event-ID` a reconnecting EventSource names (LMSP 7.3),
 * else after `starting_after`.
 */
export function streamStart(request: FastifyRequest, startingAfter: number | undefined): number {
  const lastEventId = Number(request.headers['last-event-id']);
  return Number.isInteger(lastEventId) && lastEventId >= 0 ? lastEventId : startingAfter ?? 0;
}
