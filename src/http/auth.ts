/**
 * Authentication and scopes on every route (LMSP section 4). Each route declares its access in
 * its config; a route that declares none is refused, so forgetting is never an open door.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../api/errors.js';
import { authenticate } from '../auth/clients.js';
import { hasScope, type Client, type Scope } from '../auth/types.js';
import { nowSeconds } from '../time.js';
import type { AppServices } from './services.js';

const TOUCH_INTERVAL_SECONDS = 60;

function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

export function registerAuth(app: FastifyInstance, services: AppServices): void {
  app.decorateRequest('client', null);
  app.addHook('onRequest', async (request) => {
    if (request.is404) return;
    const access = request.routeOptions.config.access;
    if (access === 'public') return;
    if (!access) throw new ServiceError('internal_error', 'This route declares no access rule.');
    const token = bearerToken(request);
    const client = token ? authenticate(services.store, token) : null;
    if (!client) throw new ServiceError('invalid_token');
    if (access !== 'authenticated' && !hasScope(client, access)) {
      throw new ServiceError('insufficient_scope', `This needs the '${access}' scope.`);
    }
    request.client = client;
    const now = nowSeconds();
    if (client.lastUsedAt === null || now - client.lastUsedAt >= TOUCH_INTERVAL_SECONDS) {
      services.store.db.write(() => services.store.clients.touch(client.id, now)).catch(() => undefined);
    }
  });
}

/** The authenticated client of a route that required one. */
export function clientOf(request: FastifyRequest): Client {
  if (!request.client) throw new ServiceError('invalid_token');
  return request.client;
}

/** Without `admin`, a client sees only its own records; others look like ids that do not exist. */
export function canSee(client: Client, ownerId: string): boolean {
  return client.id === ownerId || hasScope(client, 'admin');
}

export function hasAccess(client: Client, scope: Scope): boolean {
  return hasScope(client, scope);
}
