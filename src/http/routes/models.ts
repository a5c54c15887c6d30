/** The model registry over HTTP (LMSP section 5). */
import type { FastifyInstance } from 'fastify';
import { hasScope } from '../../domain/clients.js';
import { getModel, listModels, registerModel, removeModel, verifyModel } from '../../tasks/models.js';
import { clientKeyOf, clientOf } from '../auth.js';
import type { AppContext } from '../context.js';
import { sendStoredAnswer } from '../idempotency.js';
import { idParams, registerModelBody } from '../schemas.js';

export function registerModelRoutes(app: FastifyInstance, context: AppContext): void {
  const { core } = context;

  app.get('/v1/models', { config: { access: 'models:read' } }, async (request) => ({
    object: 'list',
    data: listModels(core, hasScope(clientOf(request), 'models:write')),
  }));

  app.get('/v1/models/:id', { config: { access: 'models:read' }, schema: { params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    return getModel(core, id, hasScope(clientOf(request), 'models:write'));
  });

  app.post('/v1/models', { config: { access: 'models:write', answers: { 201: 'The model, registered' } }, schema: { body: registerModelBody } }, async (request, reply) => {
    const body = request.body as { path: string; id?: string | null };
    // A relative path starts at the models directory; the registry reads it as given, as the kernel does.
    const outcome = await registerModel(core, { path: body.path, id: body.id ?? undefined }, { restrictToModelsDir: true }, clientKeyOf(request, context),
      clientOf(request).id);
    if ('replay' in outcome) return sendStoredAnswer(reply, outcome.replay);
    return reply.code(201).send(outcome.model);
  });

  app.delete('/v1/models/:id', { config: { access: 'models:write' }, schema: { params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    const removed = await removeModel(core, id);
    context.metrics?.forgetModel(id);
    return removed;
  });

  app.post('/v1/models/:id/verify', { config: { access: 'models:write' }, schema: { params: idParams } }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const outcome = await verifyModel(core, id, clientKeyOf(request, context), undefined, clientOf(request).id);
    if ('replay' in outcome) return sendStoredAnswer(reply, outcome.replay);
    return reply.code(200).send(outcome.model);
  });
}
