/**
 * Tasks and their event logs (LMSP 7.1, 7.3, 7.4): list, get, events as pages or a stream, cancel.
 * Who may read which kinds is task-queries.ts's `readableTaskKinds`: `responses`, or
 * `models:write` for its own model pulls.
 */
import type { FastifyInstance } from 'fastify';
import { toTaskObject } from '../../api/views.js';
import type { TaskKind, TaskStatus } from '../../domain/tasks.js';
import { cancelTask } from '../../tasks/cancel.js';
import { listTasks, taskEventsPage, visibleTask } from '../../tasks/task-queries.js';
import { clientKeyOf, clientOf } from '../auth.js';
import { CANCEL_ANSWERS, type AppContext } from '../context.js';
import { sendStoredAnswer } from '../idempotency.js';
import { idParams, listTasksQuery, taskEventsQuery } from '../schemas.js';
import { sequenceNumberOf, streamStart, streamTaskEvents, wantsEventStream } from '../streams.js';

export function registerTaskRoutes(app: FastifyInstance, context: AppContext): void {
  const { core } = context;

  app.get('/v1/tasks', { config: { access: 'authenticated' }, schema: { querystring: listTasksQuery } }, async (request) => {
    const query = request.query as { status?: string; kind?: string; limit: number; after?: string; order: 'asc' | 'desc' };
    return listTasks(core, clientOf(request), {
      statuses: query.status ? (query.status.split(',') as TaskStatus[]) : null,
      kinds: query.kind ? (query.kind.split(',') as TaskKind[]) : null,
      limit: query.limit,
      after: query.after ?? null,
      order: query.order,
    });
  });

  app.get('/v1/tasks/:id', { config: { access: 'authenticated' }, schema: { params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    return toTaskObject(visibleTask(core, clientOf(request), id));
  });

  app.get('/v1/tasks/:id/events', {
    config: { access: 'authenticated', answers: { 200: { description: 'A page of the events, or with stream=true the events as they come', stream: true } } },
    schema: { params: idParams, querystring: taskEventsQuery },
  }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const query = request.query as { starting_after: string; limit: number; stream?: boolean };
    const client = clientOf(request);
    const task = visibleTask(core, client, id);
    if (query.stream === true || wantsEventStream(request)) {
      await streamTaskEvents(context, reply, client, task.id, streamStart(request, query.starting_after));
      return;
    }
    return taskEventsPage(core, task, sequenceNumberOf(query.starting_after), query.limit);
  });

  app.post('/v1/tasks/:id/cancel', { config: { access: 'authenticated', answers: CANCEL_ANSWERS }, schema: { params: idParams } }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const answer = await cancelTask(core, clientOf(request), clientKeyOf(request, context),
      (client) => visibleTask(core, client, id), toTaskObject);
    if (answer.replayed) return sendStoredAnswer(reply, answer);
    return reply.code(answer.status).send(answer.body);
  });
}
