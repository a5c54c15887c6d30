/**
 * A chat completion streamed as OpenAI streams it (LMSP 13): `data: <chunk>` frames, then
 * `data: [DONE]`. The frames are the task's `chat.completion.chunk` events, replayed from the log
 * and followed live, so a replayed idempotent create sends the same chunks again. A task that
 * fails or is cancelled ends the stream with an error frame, as OpenAI's stream reports errors.
 */
import type { FastifyReply } from 'fastify';
import { chatStreamFrame } from '../api/chat-completion-events.js';
import type { Client } from '../domain/clients.js';
import { taskEndError } from '../tasks/chat-completions.js';
import { followTask, type FollowEnd } from '../tasks/follow.js';
import type { AppContext } from './context.js';
import { openEventStream, writeFrames } from './sse.js';

/**
 * Streams the chunks of a chat completion's task from its first event until its terminal one,
 * and tells whether the client left first. The stream's place counts against the client's
 * limits (LMSP 16); revoking the client ends it (LMSP 4).
 */
export async function streamChatChunks(context: AppContext, reply: FastifyReply, client: Client, taskId: string,
  options: {
    headers?: Record<string, string>;
    place?: () => void;
    /** Runs once the log is followed to its end, before the stream is closed. */
    beforeClose?: (clientGone: boolean) => Promise<void>;
  } = {}): Promise<{ end: FollowEnd; clientGone: boolean }> {
  const { store, bus } = context.core;
  const release = options.place ?? context.connections.openStream(client.id);
  const unbind = context.connections.bind(client.id, () => reply.raw.destroy());
  const abort = new AbortController();
  const raw = reply.raw;
  try {
    openEventStream(reply, context.heartbeatMs, options.headers).on('close', () => abort.abort());
    const errorOf = () => taskEndError(store.tasks.get(taskId), taskId).toBody();
    const end = await followTask(store, bus, taskId, 0, abort.signal, async (events) => {
      if (raw.writableEnded || raw.destroyed) return;
      const frames = events.map((event) => chatStreamFrame(event, errorOf)).filter((frame) => frame !== null).join('');
      if (frames !== '') await writeFrames(raw, frames);
    });
    const clientGone = abort.signal.aborted && !raw.writableFinished;
    await options.beforeClose?.(clientGone);
    return { end, clientGone };
  } finally {
    if (!raw.writableEnded) raw.end();
    unbind();
    release();
  }
}
