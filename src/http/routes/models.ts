/** The model registry over HTTP (LMSP section 5). */
import { isAbsolute, resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../api/errors.js';
import { hasScope } from '../../auth/types.js';
import { toModelObject } from '../../models/registry.js';
import { clientOf } from '../auth.js';
import { idempotencyOf, priorAnswer, sendStoredAnswer, storeAnswer } from '../idempotency.js';
import { idParams, registerModelBody } from '../schemas.js';
import type { AppServices } from '../services.js';

export function registerModelRoutes(app: FastifyInstance, services: AppServices): void {
  const { registry, engine, store } = services;
  const view = (includePath: boolean) => (model: Parameters<typeof toModelObject>[0]) =>
    toModelObject(model, engine.loadedModelIds().has(model.id), includePath);

  app.get('/v1/models', { config: { access: 'models:read' } }, async (request) => {
    const includePath = hasScope(clientOf(request), 'models:write');
    return { object: 'list', data: registry.list().map(view(includePath)) };
  });

  app.get('/v1/models/:id', { config: { access: 'models:read' }, schema: { params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    const model = registry.get(id);
    if (!model) throw new ServiceError('model_not_found', `The model '${id}' does not exist.`, { param: 'id' });
    return view(hasScope(clientOf(request), 'models:write'))(model);
  });

  app.post('/v1/models', { config: { access: 'models:write' }, schema: { body: registerModelBody } }, async (request, reply) => {
    const client = clientOf(request);
    const body = request.body as { path: string; id?: string };
    const idempotency = idempotencyOf(request, `client:${client.id}`);
    const prior = idempotency ? priorAnswer(store, idempotency) : null;
    if (prior) return sendStoredAnswer(reply, prior);
    const path = isAbsolute(body.path) ? body.path : resolve(registry.modelsDir, body.path);
    const model = await registry.register({ path, id: body.id }, {
      restrictToModelsDir: true,
      alsoInTransaction: (_context, registered) => {
        if (idempotency) storeAnswer(store, idempotency, services.config.idempotencyTtlMs, { status: 201, body: view(true)(registered) });
      },
    });
    return reply.code(201).send(view(true)(model));
  });

  app.delete('/v1/models/:id', { config: { access: 'models:write' }, schema: { params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    await registry.remove(id);
    return { id, object: 'model', deleted: true };
  });

  app.post('/v1/models/:id/verify', { config: { access: 'models:write' }, schema: { params: idParams } }, async (request, reply) => {
    const client = clientOf(request);
    const { id } = request.params as { id: string };
    const idempotency = idempotencyOf(request, `client:${client.id}`);
    const prior = idempotency ? priorAnswer(store, idempotency) : null;
    if (prior) return sendStoredAnswer(reply, prior);
    const model = await registry.verify(id);
    const body = view(true)(model);
    if (idempotency) await store.db.write(() => storeAnswer(store, idempotency, services.config.idempotencyTtlMs, { status: 200, body }));
    return reply.code(200).send(body);
  });
}
