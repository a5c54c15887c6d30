/** Pulling a model (LMSP 5.1): `POST /v1/models/pull` makes a `model_pull` task; it is followed under /v1/tasks. */
import type { FastifyInstance } from 'fastify';
import { createPull, taskLocation, type CreatePullBody } from '../../tasks/pulls.js';
import { toTaskObject } from '../../api/views.js';
import { clientKeyOf, clientOf } from '../auth.js';
import type { AppContext } from '../context.js';
import { sendStoredAnswer } from '../idempotency.js';
import { pullModelBody } from '../schemas.js';

export function registerPullRoutes(app: FastifyInstance, context: AppContext): void {
  const { core, pulls } = context;
  if (!pulls) return;
  app.post('/v1/models/pull', { config: { access: 'models:write', answers: { 202: 'The pull task, on disk (Location names it)' } }, schema: { body: pullModelBody } }, async (request, reply) => {
    const outcome = await createPull(core, clientOf(request), request.body as CreatePullBody, pulls.settings, clientKeyOf(request, context),
      { maxUnfinishedTasks: context.config.maxUnfinishedTasksPerClient });
    if ('replay' in outcome) return sendStoredAnswer(reply, outcome.replay);
    return reply.code(202).header('location', taskLocation(outcome.task.id)).send(toTaskObject(outcome.task));
  });
}
