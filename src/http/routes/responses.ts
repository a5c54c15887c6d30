/**
 * The Responses API (LMSP section 6): create in its four modes, retrieve (JSON or a replayed and
 * live stream), cancel, delete and input items.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../../api/errors.js';
import type { CreateResponseBody, InputItemList } from '../../api/types.js';
import { toResponseObject } from '../../api/views.js';
import { prepareResponse } from '../../tasks/create-response.js';
import { isFinal } from '../../tasks/states.js';
import type { Task } from '../../tasks/types.js';
import { clientOf } from '../auth.js';
import {
  completeInFlight, idempotencyOf, priorAnswer, releaseKey, sendStoredAnswer, storeAnswer, storeInFlight,
  type IdempotencyRequest, type StoredAnswer,
} from '../idempotency.js';
import { createResponseBody, idParams, retrieveResponseQuery } from '../schemas.js';
import type { AppServices } from '../services.js';
import {
  cancelForDisconnect, handleCancel, responseView, streamTaskEvents, visibleTaskOfResponse, waitForFinish,
} from './task-routes-common.js';

const inputItemsQuery = {
  type: 'object',
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    order: { type: 'string', enum: ['asc', 'desc'], default: 'desc' },
    after: { type: 'string' },
  },
} as const;

export function registerResponseRoutes(app: FastifyInstance, services: AppServices): void {
  const { store } = services;

  /** After a response that lived only for this request: forget it (`store: false`). */
  const deleteIfEphemeral = async (task: Task | null, storeResponse: boolean) => {
    if (!task || storeResponse) return;
    await store.db.write(() => store.lifecycle.deleteFinished(task.id)).catch(() => undefined);
  };

  /** Replays a stored create: the same body, or for a streaming create its events from the start. */
  const replayCreate = async (reply: FastifyReply, answer: StoredAnswer): Promise<FastifyReply | void> => {
    if (answer.streamTaskId) {
      await streamTaskEvents(services, reply, answer.streamTaskId, 0, { 'idempotent-replayed': 'true' });
      return;
    }
    return sendStoredAnswer(reply, answer);
  };

  app.post('/v1/responses', { config: { access: 'responses' }, schema: { body: createResponseBody } }, async (request, reply) => {
    const client = clientOf(request);
    const body = request.body as CreateResponseBody;
    const idempotency = idempotencyOf(request, `client:${client.id}`);
    const early = idempotency ? priorAnswer(store, idempotency) : null;
    if (early) return replayCreate(reply, early);

    const prepared = await prepareResponse(services, client, body);
    const { response } = prepared;
    const location = `/v1/responses/${response.id}`;
    // LMSP 11.2: the response, its task, its first event (and the idempotency key) in one
    // transaction, committed before any answer.
    const created = await store.db.write((context): { replay: StoredAnswer } | { task: Task } => {
      const prior = idempotency ? priorAnswer(store, idempotency) : null;
      if (prior) return { replay: prior };
      const task = store.lifecycle.create(context, response, prepared.task);
      if (idempotency) {
        const ttl = services.config.idempotencyTtlMs;
        if (response.background && !response.stream) {
          storeAnswer(store, idempotency, ttl, { status: 202, headers: { location }, body: toResponseObject(response, task, '') }, task.id);
        } else if (response.background) {
          storeAnswer(store, idempotency, ttl, { status: 200, streamTaskId: task.id }, task.id);
        } else {
          storeInFlight(store, idempotency, ttl, task.id);
        }
      }
      return { task };
    });
    if ('replay' in created) return replayCreate(reply, created.replay);
    const { task } = created;

    if (response.background && !response.stream) {
      return reply.code(202).header('location', location).send(toResponseObject(response, task, ''));
    }
    if (response.stream) return streamCreated(reply, task, response.background, response.store, idempotency);
    return waitAndAnswer(request, reply, task, response.store, idempotency);
  });

  /** `stream: true`: the log from `response.created` on; without `background`, leaving cancels. */
  async function streamCreated(reply: FastifyReply, task: Task, background: boolean, storeResponse: boolean,
    idempotency: IdempotencyRequest | null): Promise<void> {
    const { clientGone } = await streamTaskEvents(services, reply, task.id, 0, { location: `/v1/responses/${task.responseId}` });
    if (background) return;
    if (clientGone) await cancelForDisconnect(services, task.id);
    const finished = await waitForFinish(services, task.id);
    if (idempotency) {
      await store.db.write(() => {
        // A request whose client left is released, as one that died with the process is.
        if (clientGone) releaseKey(store, idempotency);
        else completeInFlight(store, idempotency, { status: 200, streamTaskId: task.id });
      }).catch(() => undefined);
    }
    await deleteIfEphemeral(finished, storeResponse);
  }

  /** Neither stream nor background: wait, then 200 with the finished response, whatever its status. */
  async function waitAndAnswer(_request: FastifyRequest, reply: FastifyReply, task: Task, storeResponse: boolean,
    idempotency: IdempotencyRequest | null): Promise<FastifyReply | void> {
    let clientGone = false;
    const onClose = () => {
      if (reply.raw.writableFinished) return;
      clientGone = true;
      void cancelForDisconnect(services, task.id);
    };
    reply.raw.on('close', onClose);
    const finished = await waitForFinish(services, task.id);
    reply.raw.off('close', onClose);
    if (!finished) throw new ServiceError('not_found', 'The response was deleted before it finished.');
    const body = responseView(store, finished);
    if (idempotency) {
      await store.db.write(() => {
        if (clientGone) releaseKey(store, idempotency);
        else completeInFlight(store, idempotency, { status: 200, body });
      });
    }
    await deleteIfEphemeral(finished, storeResponse);
    if (clientGone) return;
    return reply.code(200).send(body);
  }

  app.get('/v1/responses/:id', {
    config: { access: 'responses' },
    schema: { params: idParams, querystring: retrieveResponseQuery },
  }, async (request, reply) => {
    const client = clientOf(request);
    const { id } = request.params as { id: string };
    const query = request.query as { stream?: boolean; starting_after?: number };
    const task = visibleTaskOfResponse(store, client, id);
    if (query.stream) {
      // A reconnecting EventSource names the last event it saw, as on the task event stream.
      const lastEventId = Number(request.headers['last-event-id']);
      const after = Number.isInteger(lastEventId) && lastEventId >= 0 ? lastEventId : query.starting_after ?? 0;
      await streamTaskEvents(services, reply, task.id, after);
      return;
    }
    return responseView(store, task);
  });

  app.post('/v1/responses/:id/cancel', { config: { access: 'responses' }, schema: { params: idParams } }, async (request, reply) => {
    const client = clientOf(request);
    const { id } = request.params as { id: string };
    return handleCancel(services, request, reply, client, () => visibleTaskOfResponse(store, client, id), (task) => responseView(store, task));
  });

  app.delete('/v1/responses/:id', { config: { access: 'responses' }, schema: { params: idParams } }, async (request) => {
    const client = clientOf(request);
    const { id } = request.params as { id: string };
    return store.db.write(() => {
      const task = visibleTaskOfResponse(store, client, id);
      if (!isFinal(task.status)) throw new ServiceError('response_not_finished', `Response '${id}' has not finished; cancel it first.`);
      store.lifecycle.deleteFinished(task.id);
      return { id, object: 'response', deleted: true };
    });
  });

  app.get('/v1/responses/:id/input_items', {
    config: { access: 'responses' },
    schema: { params: idParams, querystring: inputItemsQuery },
  }, async (request): Promise<InputItemList> => {
    const client = clientOf(request);
    const { id } = request.params as { id: string };
    const query = request.query as { limit: number; order: 'asc' | 'desc'; after?: string };
    visibleTaskOfResponse(store, client, id);
    const response = store.responses.get(id)!;
    const items = query.order === 'asc' ? response.inputItems : [...response.inputItems].reverse();
    const start = query.after ? items.findIndex((item) => item.id === query.after) + 1 : 0;
    const data = items.slice(start, start + query.limit);
    return {
      object: 'list',
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: start + query.limit < items.length,
    };
  });
}
