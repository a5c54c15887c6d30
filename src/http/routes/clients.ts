/** Clients, pairing codes and pairing (LMSP section 4). */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { toClientObject } from '../../api/views.js';
import { attemptKey, machineAddresses, type PairingAttempt } from '../../auth/rate-limit.js';
import { hashPairingCode, normalizePairingCode } from '../../auth/secrets.js';
import type { Scope } from '../../domain/clients.js';
import { ServiceError } from '../../domain/errors.js';
import { clientsPage, issuePairingCode, pairWithCode, revokeClient } from '../../tasks/pairing.js';
import { clientKeyOf, clientOf } from '../auth.js';
import type { AppContext } from '../context.js';
import { idempotencyKeyOf, sendStoredAnswer } from '../idempotency.js';
import { idParams, listClientsQuery, pairBody, pairingCodeBody } from '../schemas.js';

export function registerClientRoutes(app: FastifyInstance, context: AppContext): void {
  const { core } = context;

  app.get('/v1/clients/me', { config: { access: 'authenticated' } }, async (request) => toClientObject(clientOf(request)));

  // Paged as GET /v1/tasks is: newest first unless `order=asc`, `after` the last id seen.
  app.get('/v1/clients', { config: { access: 'admin' }, schema: { querystring: listClientsQuery } }, async (request) => {
    const query = request.query as { limit: number; after?: string; order: 'asc' | 'desc' };
    return clientsPage(core, { limit: query.limit, after: query.after ?? null, order: query.order });
  });

  // LMSP 4: a revoked client's streams end and its connection-bound tasks are cancelled, at once.
  const revoke = async (id: string) => {
    const revoked = await revokeClient(core, id, context.config.dataDir);
    context.connections.endClient(id);
    return revoked;
  };

  // A client ends its own token (the dashboard's sign-out; any client that is done), as an
  // admin's revoke of it would.
  app.delete('/v1/clients/me', { config: { access: 'authenticated' } }, async (request) => revoke(clientOf(request).id));

  app.delete('/v1/clients/:id', { config: { access: 'admin' }, schema: { params: idParams } },
    async (request) => revoke((request.params as { id: string }).id));

  app.post('/v1/pairing-codes', {
    config: { access: 'admin', answers: { 201: 'The pairing code, shown once' } },
    schema: { body: pairingCodeBody },
    // Every field is optional: a POST without a body is the request `{}` (its key's fingerprint
    // too). A body of JSON `null` is a body, and not an object: 400 as on every other route.
    preValidation: async (request) => {
      if (request.body === undefined) request.body = {};
    },
  }, async (request, reply) => {
    const body = request.body as { name?: string | null; scopes?: Scope[] | null; ttl_seconds?: number | null };
    // The answer holds the code: its stored copy is sealed with the caller's own token.
    const outcome = await issuePairingCode(core, {
      name: body.name ?? null,
      ...(body.scopes ? { scopes: [...new Set(body.scopes)] } : {}),
      ...(body.ttl_seconds ? { ttlMs: body.ttl_seconds * 1000 } : {}),
    }, clientKeyOf(request, context, { sealWithToken: true }), clientOf(request).id);
    if ('replay' in outcome) return sendStoredAnswer(reply, outcome.replay);
    return reply.code(201).send(outcome.code);
  });

  // LMSP 4: an attempt counts before anything is awaited, and before its body is even read (a
  // malformed code, a body that is not JSON or not JSON at all is a failed attempt too), and stays
  // counted unless it pairs: an address past its limit gets 429 whatever it sends.
  const attempts = new WeakMap<object, PairingAttempt>();
  const countAttempt = async (request: FastifyRequest) => {
    // From the machine itself through one of its other addresses, as from loopback.
    const own = request.ip === request.socket.localAddress ? [request.ip] : machineAddresses();
    const attempt = context.pairingLimiter.begin(attemptKey(request.ip, own));
    if ('retryAfterSeconds' in attempt) {
      throw new ServiceError('rate_limited', `Too many failed pairing attempts; try again in ${attempt.retryAfterSeconds} s.`, {
        headers: { 'retry-after': String(attempt.retryAfterSeconds) },
      });
    }
    attempts.set(request, attempt);
  };
  app.post('/v1/pair', { config: { access: 'public', answers: { 201: 'The client, with its token, shown once' } }, schema: { body: pairBody }, onRequest: countAttempt }, async (request, reply) => {
    const body = request.body as { code: string; client_name: string };
    const attempt = attempts.get(request)!;
    // Keys are scoped per pairing code; the answer holds the new token, sealed with the code.
    const normalized = normalizePairingCode(body.code);
    const scope = `pair:${hashPairingCode(normalized ?? body.code, core.pairingKey).toString('hex')}`;
    const key = idempotencyKeyOf(request, scope, context.config.idempotencyTtlMs, normalized ?? body.code);
    const outcome = await pairWithCode(core, body.code, body.client_name, key);
    attempt.succeeded();
    if ('replay' in outcome) return sendStoredAnswer(reply, outcome.replay);
    return reply.code(201).send(outcome.client);
  });
}
