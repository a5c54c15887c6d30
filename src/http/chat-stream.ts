/**
 * A chat completion streamed as OpenAI streams it (LMSP 13): `data: <chunk>` frames, then
 * `data: [DONE]`. The frames are the task's `chat.completion.chunk` events, replayed from the log
 * and followed live, so a replayed idempotent create sends the same chunks again. A task that
 * fails or is cancelled ends the stream with an error frame, as OpenAI's stream reports errors.
 */
import type { FastifyReply } from 'fastify';
import { CHAT_CHUNK_EVENT, chatStreamFrame } from '../api/chat-completion-events.js';
import { ServiceError } from '../domain/errors.js';
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
    /** The newest chunk this stream has sent, and whether the attempt it belongs to was dropped. */
    let lastChunkSent = 0;
    let restarted = false;
    const end = await followTask(store, bus, taskId, 0, abort.signal, async (events) => {
      if (raw.writableEnded || raw.destroyed || restarted) return;
      // LMSP 7.5: under `retry` a new attempt drops the output of the last one. Chunks already
      // sent cannot be taken back, so a stream that sent some ends with an error frame (the task
      // goes on); one that sent none, or a replay, sends the current attempt's chunks alone.
      const outputStartSeq = store.tasks.get(taskId)?.outputStartSeq ?? 0;
      if (lastChunkSent > 0 && lastChunkSent < outputStartSeq) {
        restarted = true;
        await writeFrames(raw, `data: ${JSON.stringify(new ServiceError('task_restarted',
          `The task ${taskId} starts again from the beginning (on_restart: retry), so the chunks sent so far are void. `
          + `It goes on: follow GET /v1/tasks/${taskId}/events, or once it has finished send the same request with the same `
          + 'Idempotency-Key to have its chunks replayed.').toBody())}\n\n`);
        abort.abort();
        return;
      }
      let frames = '';
      for (const event of events) {
        const frame = chatStreamFrame(event, errorOf, outputStartSeq);
        if (frame === null) continue;
        frames += frame;
        if (event.type === CHAT_CHUNK_EVENT) lastChunkSent = event.sequenceNumber;
      }
      if (frames !== '') await writeFrames(raw, frames);
    });
    const clientGone = abort.signal.aborted && !restarted && !raw.writableFinished;
    if (restarted) {
      // The stream is over for its client; the request is settled as the task finishes.
      raw.end();
      unbind();
      release();
    }
    await options.beforeClose?.(clientGone);
    return { end, clientGone };
  } finally {
    if (!raw.writableEnded) raw.end();
    unbind();
    release();
  }
}
