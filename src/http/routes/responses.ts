/**
 * The Responses API (LMSP section 6): create in its four modes, retrieve (JSON or a replayed and
 * live stream), cancel, delete and input items. Each route parses, authorizes and calls one use
 * case (src/tasks/).
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { CreateResponseBody, InputItemList } from '../../api/types.js';
import { toInputItemObject, toResponseObject } from '../../api/views.js';
import type { Client } from '../../domain/clients.js';
import { invalidRequest, ServiceError } from '../../domain/errors.js';
import type { StoredResponse } from '../../domain/responses.js';
import { responseIdOf, type Task } from '../../domain/tasks.js';
import type { IdempotencyKey, StoredAnswer } from '../../store/index.js';
import { cancelTask } from '../../tasks/cancel.js';
import { replayedPlainAnswer } from '../../tasks/orphaned-requests.js';
import { cancelForDisconnect, refuseWaitWhileStopping } from '../../tasks/waiting.js';
import {
  createResponse, deleteResponse, responseLocation, responseView, settleResponseRequest, streamedCreateAnswer, visibleTaskOfResponse,
} from '../../tasks/responses.js';
import { clientKeyOf, clientOf } from '../auth.js';
import { CANCEL_ANSWERS, type AppContext } from '../context.js';
import { sendStoredAnswer } from '../idempotency.js';
import { createResponseBody, idParams, retrieveResponseQuery } from '../schemas.js';
import { streamStart, streamTaskEvents } from '../streams.js';

const inputItemsQuery = {
  type: 'object',
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    order: { type: 'string', enum: ['asc', 'desc'], default: 'desc' },
    after: { type: 'string' },
  },
} as const;

export function registerResponseRoutes(app: FastifyInstance, context: AppContext): void {
  const { core } = context;

  /** Replays a stored create: the same body, or for a streaming create its events from the start. */
  const replayCreate = async (reply: FastifyReply, client: Client, answer: StoredAnswer, place: (() => void) | undefined): Promise<FastifyReply | void> => {
    if (answer.streamTaskId) {
      // Deleted since (DELETE, or retention shorter than --idempotency-ttl): no events to send again.
      const task = core.store.tasks.get(answer.streamTaskId);
      if (!task) {
        place?.();
        throw new ServiceError('not_found', 'The response this request created has been deleted since; its events cannot be sent again.');
      }
      // The head of the first answer again: its Location as well as its events.
      const headers = { 'idempotent-replayed': 'true', location: responseLocation(responseIdOf(task)) };
      await streamTaskEvents(context, reply, client, answer.streamTaskId, 0, { headers, cutOnRevoke: true, ...(place ? { place } : {}) });
      return;
    }
    place?.();
    return sendStoredAnswer(reply, await replayedPlainAnswer(core, answer, 'response'));
  };

  app.post('/v1/responses', {
    config: { access: 'responses', answers: { 200: { description: 'The finished response, or with stream: true its events', stream: true }, 202: 'With background: true, the response, its task on disk (Location names it)' } }, schema: { body: createResponseBody } }, async (request, reply) => {
    const client = clientOf(request);
    const body = request.body as CreateResponseBody;
    const key = clientKeyOf(request, context);
    if (!body.background) refuseWaitWhileStopping(core);
    // LMSP 16: a stream's place is taken before anything is written, so a refusal leaves nothing behind.
    const place = body.stream ? context.connections.openStream(client.id) : undefined;
    let created: Awaited<ReturnType<typeof createResponse>>;
    try {
      created = await createResponse(core, client, body, key, { maxUnfinishedTasks: context.config.maxUnfinishedTasksPerClient });
    } catch (error) {
      place?.();
      throw error;
    }
    if ('replay' in created) return replayCreate(reply, client, created.replay, place);
    const { response, task } = created;
    if (response.background && !response.stream) {
      return reply.code(202).header('location', responseLocation(response.id)).send(toResponseObject(response, task, ''));
    }
    if (response.stream) return streamCreated(reply, client, task, response, key, place!);
    return waitAndAnswer(reply, client, task, response.store, key);
  });

  /**
   * `stream: true`: the log from `response.created` on; without `background`, leaving cancels.
   * The request is settled (its key answered, a `store: false` response deleted) before the
   * stream closes, so a retry that follows the end of the stream is a replay, not 409
   * `idempotency_key_in_flight`, and the response is gone once its client has seen it end.
   */
  async function streamCreated(reply: FastifyReply, client: Client, task: Task, response: StoredResponse,
    key: IdempotencyKey | null, place: () => void): Promise<void> {
    await streamTaskEvents(context, reply, client, task.id, 0, {
      headers: { location: responseLocation(response.id) },
      place,
      cutOnRevoke: true,
      ...(response.background ? {} : {
        beforeClose: async (clientGone: boolean) => {
          await settleResponseRequest(core, task, key, {
            clientGone: () => clientGone, storeResponse: response.store, answerOf: (finished) => streamedCreateAnswer(core, finished, response.store),
          }).catch(() => undefined);
        },
      }),
    });
  }

  /** Neither stream nor background: wait, then 200 with the finished response, whatever its status. */
  async function waitAndAnswer(reply: FastifyReply, client: Client, task: Task, storeResponse: boolean,
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
    const { finished, answer } = await settleResponseRequest(core, task, key, {
      clientGone: () => clientGone,
      storeResponse,
      answerOf: (done) => ({ status: 200, body: responseView(core, done) }),
    });
    reply.raw.off('close', onClose);
    unbind();
    if (clientGone) return;
    if (!finished || !answer) throw new ServiceError('not_found', 'The response was deleted before it finished.');
    return reply.code(200).send(answer.body);
  }

  app.get('/v1/responses/:id', {
    config: { access: 'responses', answers: { 200: { description: 'The response, or with stream=true its events', stream: true } } },
    schema: { params: idParams, querystring: retrieveResponseQuery },
  }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const query = request.query as { stream?: boolean; starting_after?: string };
    const client = clientOf(request);
    const task = visibleTaskOfResponse(core, client, id);
    if (query.stream) {
      await streamTaskEvents(context, reply, client, task.id, streamStart(request, query.starting_after));
      return;
    }
    return responseView(core, task);
  });

  app.post('/v1/responses/:id/cancel', { config: { access: 'responses', answers: CANCEL_ANSWERS }, schema: { params: idParams } }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const answer = await cancelTask(core, clientOf(request), clientKeyOf(request, context),
      (client) => visibleTaskOfResponse(core, client, id), (task) => responseView(core, task));
    if (answer.replayed) return sendStoredAnswer(reply, answer);
    return reply.code(answer.status).send(answer.body);
  });

  app.delete('/v1/responses/:id', { config: { access: 'responses' }, schema: { params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    return deleteResponse(core, clientOf(request), id);
  });

  app.get('/v1/responses/:id/input_items', {
    config: { access: 'responses' },
    schema: { params: idParams, querystring: inputItemsQuery },
  }, async (request): Promise<InputItemList> => {
    const { id } = request.params as { id: string };
    const query = request.query as { limit: number; order: 'asc' | 'desc'; after?: string };
    visibleTaskOfResponse(core, clientOf(request), id);
    const response = core.store.responses.get(id)!;
    const items = query.order === 'asc' ? response.inputItems : [...response.inputItems].reverse();
    const start = query.after !== undefined ? items.findIndex((item) => item.id === query.after) + 1 : 0;
    // A cursor that names no item is an error, as in every other list, not the first page again.
    if (query.after !== undefined && start === 0) throw invalidRequest('after', `No input item with id '${query.after}' in this response.`);
    // Messages, and with tools (LMSP 6.2) function_call and function_call_output items: read `type` first.
    const data = items.slice(start, start + query.limit).map(toInputItemObject);
    return {
      object: 'list',
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: start + query.limit < items.length,
    };
  });
}
