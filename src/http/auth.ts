/**
 * Authentication and scopes on every route (LMSP section 4). Each route declares its access in
 * its config; a route that declares none is refused, so forgetting is never an open door.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticate } from '../auth/clients.js';
import { hasScope, type Client } from '../domain/clients.js';
import { ServiceError } from '../domain/errors.js';
import type { IdempotencyKey } from '../store/index.js';
import { nowSeconds } from '../time.js';
import type { AppContext } from './context.js';
import { headerCount } from './edge.js';
import { idempotencyKeyOf } from './idempotency.js';

const TOUCH_INTERVAL_SECONDS = 60;

/**
 * The request's bearer token; none when it sends two Authorization headers (Node keeps the first
 * and drops the rest: credentials that say two things are not taken at all).
 */
export function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (!header) return null;
  if (headerCount(request.raw, 'authorization') > 1) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

/** Whether a request target lies under /v1 (origin or absolute form). */
function isApiPath(target: string): boolean {
  let path: string;
  try {
    path = new URL(target, 'http://localhost').pathname;
  } catch {
    return false;
  }
  return path === '/v1' || path.startsWith('/v1/');
}

export function registerAuth(app: FastifyInstance, context: AppContext): void {
  const { store } = context.core;
  app.decorateRequest('client', null);
  const clientOfToken = (request: FastifyRequest): Client | null => {
    const token = bearerToken(request);
    return token ? authenticate(store, token) : null;
  };
  app.addHook('onRequest', async (request) => {
    if (request.is404) {
      // LMSP 4: every /v1 path needs a token, one that names no route too: without one the
      // answer is 401, not a 404 that would tell which paths exist.
      if (isApiPath(request.url) && !clientOfToken(request)) throw new ServiceError('invalid_token');
      return;
    }
    const access = request.routeOptions.config.access;
    if (access === 'public') return;
    if (!access) throw new ServiceError('internal_error', 'This route declares no access rule.');
    const client = clientOfToken(request);
    if (!client) throw new ServiceError('invalid_token');
    if (access !== 'authenticated' && !hasScope(client, access)) {
      throw new ServiceError('insufficient_scope', `This needs the '${access}' scope.`);
    }
    // LMSP 4: `metrics` grants GET /metrics only, so a scrape token alone reaches nothing else,
    // not even the routes every other token may use (its own record).
    if (access === 'authenticated' && client.scopes.every((scope) => scope === 'metrics')) {
      throw new ServiceError('insufficient_scope', "A token with the 'metrics' scope alone serves GET /metrics only.");
    }
    request.client = client;
    const now = nowSeconds();
    if (client.lastUsedAt === null || now - client.lastUsedAt >= TOUCH_INTERVAL_SECONDS) {
      store.db.write(() => store.clients.touch(client.id, now)).catch(() => undefined);
    }
  });
  // LMSP 4: a revoke stops a token at once, a request already under way included. The token is
  // checked when the headers arrive (so a refused request is not read any further), and again
  // once its body has been read, before the handler acts: a body sent slowly cannot outlive a
  // revoke. Creates and keyed effects check once more inside their own transaction.
  app.addHook('preHandler', async (request) => {
    if (!request.client || request.method === 'GET' || request.method === 'HEAD') return;
    const client = clientOfToken(request);
    if (!client) throw new ServiceError('invalid_token');
    request.client = client;
  });
}

/** The authenticated client of a route that required one. */
export function clientOf(request: FastifyRequest): Client {
  if (!request.client) throw new ServiceError('invalid_token');
  return request.client;
}

/** The Idempotency-Key of an authenticated client's POST: its keys are its own (LMSP section 8). */
export function clientKeyOf(request: FastifyRequest, context: AppContext, options: { sealWithToken?: boolean } = {}): IdempotencyKey | null {
  const client = clientOf(request);
  return idempotencyKeyOf(request, `client:${client.id}`, context.config.idempotencyTtlMs,
    options.sealWithToken ? bearerToken(request) ?? '' : null);
}
