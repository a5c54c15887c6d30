/** Tasks and their event logs (LMSP 7.1, 7.3, 7.4): list, get, events as pages or a stream, cancel. */
import type { FastifyInstance } from 'fastify';
import { invalidRequest } from '../../api/errors.js';
import type { ListObject, TaskEvent } from '../../api/types.js';
import { toTaskObject } from '../../api/views.js';
import { hasScope } from '../../auth/types.js';
import { toTaskEvent } from '../../store/events.js';
import type { TaskStatus } from '../../tasks/states.js';
import { canSee, clientOf } from '../auth.js';
import { idParams, listTasksQuery, taskEventsQuery } from '../schemas.js';
import type { AppServices } from '../services.js';
import { handleCancel, streamTaskEvents, visibleTask } from './task-routes-common.js';

export function registerTaskRoutes(app: FastifyInstance, services: AppServices): void {
  const { store } = services;

  app.get('/v1/tasks', { config: { access: 'responses' }, schema: { querystring: listTasksQuery } }, async (request) => {
    const client = clientOf(request);
    const query = request.query as { status?: string; limit: number; after?: string; order: 'asc' | 'desc' };
    let afterSeq: number | null = null;
    if (query.after) {
      const cursor = store.tasks.get(query.after);
      if (!cursor || !canSee(client, cursor.clientId)) throw invalidRequest('after', `No task with id '${query.after}'.`);
      afterSeq = cursor.seq;
    }
    const { tasks, hasMore } = store.tasks.list({
      clientId: hasScope(client, 'admin') ? null : client.id,
      statuses: query.status ? (query.status.split(',') as TaskStatus[]) : null,
      afterSeq,
      limit: query.limit,
      order: query.order,
    });
    const data = tasks.map(toTaskObject);
    return { object: 'list', data, has_more: hasMore, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
  });

  app.get('/v1/tasks/:id', { config: { access: 'responses' }, schema: { params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    return toTaskObject(visibleTask(store, clientOf(request), id));
  });

  app.get('/v1/tasks/:id/events', {
    config: { access: 'responses' },
    schema: { params: idParams, querystring: taskEventsQuery },
  }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const query = request.query as { starting_after: number; limit: number; stream?: boolean };
    const task = visibleTask(store, clientOf(request), id);
    const wantsStream = query.stream === true || (request.headers.accept ?? '').includes('text/event-stream');
    if (wantsStream) {
      // A reconnecting EventSource names the last event it saw (LMSP 7.3).
      const lastEventId = Number(request.headers['last-event-id']);
      const after = Number.isInteger(lastEventId) && lastEventId >= 0 ? lastEventId : query.starting_after;
      await streamTaskEvents(services, reply, task.id, after);
      return;
    }
    const rows = store.events.after(task.id, query.starting_after, query.limit + 1);
    const data = rows.slice(0, query.limit).map(toTaskEvent);
    return { object: 'list', data, has_more: rows.length > query.limit } satisfies ListObject<TaskEvent>;
  });

  app.post('/v1/tasks/:id/cancel', { config: { access: 'responses' }, schema: { params: idParams } }, async (request, reply) => {
    const client = clientOf(request);
    const { id } = request.params as { id: string };
    return handleCancel(services, request, reply, client, () => visibleTask(store, client, id), toTaskObject);
  });
}
