/** Service identity and health (LMSP section 3); neither needs a token. */
import type { FastifyInstance } from 'fastify';
import type { ServiceObject } from '../../api/types.js';
import { SOFTWARE_VERSION } from '../../paths.js';
import type { AppContext } from '../context.js';

export function registerServiceRoutes(app: FastifyInstance, context: AppContext): void {
  app.get('/v1/service', { config: { access: 'public' } }, async (): Promise<ServiceObject> => ({
    object: 'service',
    id: context.serviceId,
    name: context.config.name,
    protocol: 'lmsp',
    protocol_version: '1.0',
    software: { name: 'lmsp', version: SOFTWARE_VERSION },
    capabilities: {
      background: true, stream: true, resume: true, idempotency: true, chat_completions: true,
      embeddings: true, structured_output: true, tools: true, model_pull: context.pulls !== undefined,
    },
  }));

  // LMSP 4: every /v1 path but /v1/service and /v1/pair needs a token, so the document is public
  // outside /v1 and, for a client already holding a token, under it too.
  app.get('/openapi.json', { config: { access: 'public' }, schema: { hide: true } }, async () => app.swagger());
  app.get('/v1/openapi.json', { config: { access: 'authenticated' }, schema: { hide: true } }, async () => app.swagger());

  // The service listens only once the database is open, migrated and recovered, so answering
  // at all means healthy.
  app.get('/healthz', { config: { access: 'public' } }, async () => ({ status: 'ok' }));
}
