/**
 * Chat Completions (LMSP 13): create, plain or streamed, each a durable task whose id the
 * `LMSP-Task-Id` header names; and the stored completions: list, get, messages, update, delete.
 * Each route parses, authorizes and calls one use case (src/tasks/chat-completions.ts).
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { CreateChatCompletionBody } from '../../api/chat-completions.js';
import type { StoredChatCompletion } from '../../domain/chat-completions.js';
import type { Client } from '../../domain/clients.js';
import { ServiceError, invalidRequest } from '../../domain/errors.js';
import type { Task } from '../../domain/tasks.js';
import type { IdempotencyKey, StoredAnswer } from '../../store/index.js';
import {
  chatCompletionMessages, chatCompletionView, createChatCompletion, deleteChatCompletion, listChatCompletions,
  settleChatCompletionRequest, TASK_ID_HEADER, updateChatCompletion, visibleTaskOfCompletion,
} from '../../tasks/chat-completions.js';
import { replayedPlainAnswer } from '../../tasks/orphaned-requests.js';
import { cancelForDisconnect, refuseWaitWhileStopping } from '../../tasks/waiting.js';
import { clientKeyOf, clientOf } from '../auth.js';
import { streamChatChunks } from '../chat-stream.js';
import {
  chatMessagesQuery, completionIdParams, createChatCompletionBody, listChatCompletionsQuery, updateChatCompletionBody,
} from '../chat-schemas.js';
import type { AppContext } from '../context.js';
import { sendStoredAnswer } from '../idempotency.js';

const METADATA_FILTER = /^metadata\[(.*)\]$/s;

/** `metadata[k]=v` query parameters (as the `openai` package writes them) to `{k: v}`. */
function metadataFilter(query: Record<string, unknown>): Record<string, string> {
  // No prototype: a key such as `__proto__` is a pair to match like any other, never dropped.
  const filter = Object.create(null) as Record<string, string>;
  for (const [name, value] of Object.entries(query)) {
    const match = METADATA_FILTER.exec(name);
    if (!match) {
      // `metadata=v` or `metadata[k` is a filter mistyped, never one to leave out.
      if (name.startsWith('metadata')) throw invalidRequest(name, `'${name}' is not a metadata filter: write metadata[key]=value.`);
      continue;
    }
    // A filter is never silently left out (that would list everything): one value per key; the
    // empty key is a key like any other, as metadata may hold it.
    if (typeof value !== 'string') throw invalidRequest(name, `'${name}' must be given once, with one value.`);
    filter[match[1]!] = value;
  }
  return filter;
}

export function registerChatCompletionRoutes(app: FastifyInstance, context: AppContext): void {
  const { core } = context;

  /** Replays a stored create: the same answer, or for a streamed create its chunks from the start. */
  const replayCreate = async (reply: FastifyReply, client: Client, answer: StoredAnswer, place: (() => void) | undefined): Promise<FastifyReply | void> => {
    if (answer.streamTaskId) {
      // Deleted since (DELETE, or retention shorter than --idempotency-ttl): no chunks to send again.
      if (!core.store.tasks.get(answer.streamTaskId)) {
        place?.();
        throw new ServiceError('not_found', 'The chat completion this request created has been deleted since; its chunks cannot be sent again.');
      }
      await streamChatChunks(context, reply, client, answer.streamTaskId, {
        headers: { ...answer.headers, 'idempotent-replayed': 'true' }, ...(place ? { place } : {}),
      });
      return;
    }
    place?.();
    return sendStoredAnswer(reply, await replayedPlainAnswer(core, answer, 'chat completion'));
  };

  app.post('/v1/chat/completions', { config: { access: 'responses', answers: { 200: { description: 'The chat completion, or with stream: true its chunks', stream: true } } }, schema: { body: createChatCompletionBody } }, async (request, reply) => {
    const client = clientOf(request);
    const body = request.body as CreateChatCompletionBody;
    const key = clientKeyOf(request, context);
    refuseWaitWhileStopping(core);
    // LMSP 16: a stream's place is taken before anything is written, so a refusal leaves nothing behind.
    const place = body.stream ? context.connections.openStream(client.id) : undefined;
    let created: Awaited<ReturnType<typeof createChatCompletion>>;
    try {
      created = await createChatCompletion(core, client, body, key, { maxUnfinishedTasks: context.config.maxUnfinishedTasksPerClient });
    } catch (error) {
      place?.();
      throw error;
    }
    if ('replay' in created) return replayCreate(reply, client, created.replay, place);
    const { completion, task } = created;
    if (completion.stream) return streamCreated(reply, client, task, completion, key, place!);
    return waitAndAnswer(reply, client, task, completion, key);
  });

  /**
   * `stream: true`: the chunks from the first on; a client that leaves cancels the task. The
   * request is settled (its key answered) before the stream closes, so a retry that follows the
   * end of the stream is a replay, not 409 `idempotency_key_in_flight`.
   */
  async function streamCreated(reply: FastifyReply, client: Client, task: Task, completion: StoredChatCompletion,
    key: IdempotencyKey | null, place: () => void): Promise<void> {
    await streamChatChunks(context, reply, client, task.id, {
      headers: { [TASK_ID_HEADER]: task.id },
      place,
      beforeClose: async (clientGone) => {
        await settleChatCompletionRequest(core, task, completion, key, () => clientGone).catch(() => undefined);
      },
    });
  }

  /** Not streamed: wait, then the completion (or the error its task ended with). */
  async function waitAndAnswer(reply: FastifyReply, client: Client, task: Task, completion: StoredChatCompletion,
    key: IdempotencyKey | null): Promise<FastifyReply | void> {
    let clientGone = false;
    const onClose = () => {
      if (reply.raw.writableFinished) return;
      clientGone = true;
      void cancelForDisconnect(core, task.id);
    };
    reply.raw.on('close', onClose);
    // Revoking the client ends the request: its task is cancelled as on a disconnect (LMSP 4).
    const unbind = context.connections.bind(client.id, () => reply.raw.destroy());
    const { finished, answer } = await settleChatCompletionRequest(core, task, completion, key, () => clientGone);
    reply.raw.off('close', onClose);
    unbind();
    if (clientGone) return;
    if (!finished || !answer) throw new ServiceError('not_found', 'The chat completion was deleted before it finished.');
    for (const [name, value] of Object.entries(answer.headers ?? {})) reply.header(name, value);
    return reply.code(answer.status).send(answer.body);
  }

  app.get('/v1/chat/completions', { config: { access: 'responses' }, schema: { querystring: listChatCompletionsQuery } }, async (request) => {
    const query = request.query as { limit: number; after?: string; order: 'asc' | 'desc'; model?: string } & Record<string, unknown>;
    return listChatCompletions(core, clientOf(request), {
      limit: query.limit,
      after: query.after ?? null,
      order: query.order,
      model: query.model ?? null,
      metadata: metadataFilter(query),
    });
  });

  app.get('/v1/chat/completions/:completion_id', { config: { access: 'responses' }, schema: { params: completionIdParams } }, async (request) => {
    const { completion_id: id } = request.params as { completion_id: string };
    return chatCompletionView(core, visibleTaskOfCompletion(core, clientOf(request), id));
  });

  app.get('/v1/chat/completions/:completion_id/messages', {
    config: { access: 'responses' },
    schema: { params: completionIdParams, querystring: chatMessagesQuery },
  }, async (request) => {
    const { completion_id: id } = request.params as { completion_id: string };
    const query = request.query as { limit: number; after?: string; order: 'asc' | 'desc' };
    return chatCompletionMessages(core, clientOf(request), id, { limit: query.limit, after: query.after ?? null, order: query.order });
  });

  app.post('/v1/chat/completions/:completion_id', {
    config: { access: 'responses' },
    schema: { params: completionIdParams, body: updateChatCompletionBody },
  }, async (request, reply) => {
    const { completion_id: id } = request.params as { completion_id: string };
    const { metadata } = request.body as { metadata: Record<string, string> | null };
    const { answer, replayed } = await updateChatCompletion(core, clientOf(request), id, metadata, clientKeyOf(request, context));
    if (replayed) return sendStoredAnswer(reply, answer);
    return reply.code(answer.status).send(answer.body);
  });

  app.delete('/v1/chat/completions/:completion_id', { config: { access: 'responses' }, schema: { params: completionIdParams } }, async (request) => {
    const { completion_id: id } = request.params as { completion_id: string };
    return deleteChatCompletion(core, clientOf(request), id);
  });
}
