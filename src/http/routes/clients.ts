/** Clients, pairing codes and pairing (LMSP section 4). */
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../api/errors.js';
import type { PairingCodeObject } from '../../api/types.js';
import { createPairingCode, pairClient, toClientObject } from '../../auth/clients.js';
import { hashPairingCode, normalizePairingCode } from '../../auth/secrets.js';
import type { Scope } from '../../auth/types.js';
import { nowSeconds } from '../../time.js';
import { clientOf } from '../auth.js';
import { idempotencyOf, priorAnswer, sendStoredAnswer, storeAnswer, type StoredAnswer } from '../idempotency.js';
import { idParams, pairBody, pairingCodeBody } from '../schemas.js';
import type { AppServices } from '../services.js';

function bearer(header: string | undefined): string {
  return /^Bearer\s+(\S+)/i.exec(header ?? '')?.[1] ?? '';
}

export function registerClientRoutes(app: FastifyInstance, services: AppServices): void {
  const { store } = services;

  app.get('/v1/clients/me', { config: { access: 'authenticated' } }, async (request) => toClientObject(clientOf(request)));

  app.get('/v1/clients', { config: { access: 'admin' } }, async () => ({
    object: 'list',
    data: store.clients.list().map(toClientObject),
    has_more: false,
  }));

  app.delete('/v1/clients/:id', { config: { access: 'admin' }, schema: { params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    return store.db.write(() => {
      if (!store.clients.get(id)) throw new ServiceError('not_found', `No client with id '${id}'.`, { param: 'id' });
      store.clients.revoke(id, nowSeconds());
      return toClientObject(store.clients.get(id)!);
    });
  });

  app.post('/v1/pairing-codes', { config: { access: 'admin' }, schema: { body: pairingCodeBody } }, async (request, reply) => {
    const client = clientOf(request);
    const body = request.body as { name?: string | null; scopes?: Scope[]; ttl_seconds?: number };
    // The answer holds the code: its stored copy is sealed with the caller's own token.
    const idempotency = idempotencyOf(request, `client:${client.id}`, bearer(request.headers.authorization));
    const early = idempotency ? priorAnswer(store, idempotency) : null;
    if (early) return sendStoredAnswer(reply, early);
    const result = await store.db.write((): StoredAnswer => {
      const prior = idempotency ? priorAnswer(store, idempotency) : null;
      if (prior) return { ...prior, headers: { ...prior.headers, 'idempotent-replayed': 'true' } };
      const issued = createPairingCode(store, {
        name: body.name ?? null,
        ...(body.scopes ? { scopes: body.scopes } : {}),
        ...(body.ttl_seconds ? { ttlMs: body.ttl_seconds * 1000 } : {}),
      });
      const object: PairingCodeObject = { object: 'pairing_code', code: issued.code, name: issued.name, scopes: issued.scopes, expires_at: issued.expiresAt };
      const answer: StoredAnswer = { status: 201, body: object };
      if (idempotency) storeAnswer(store, idempotency, services.config.idempotencyTtlMs, answer);
      return answer;
    });
    for (const [name, value] of Object.entries(result.headers ?? {})) reply.header(name, value);
    return reply.code(result.status).send(result.body);
  });

  app.post('/v1/pair', { config: { access: 'public' }, schema: { body: pairBody } }, async (request, reply) => {
    const body = request.body as { code: string; client_name: string };
    const address = request.ip;
    const retryAfter = services.pairingLimiter.retryAfterSeconds(address);
    if (retryAfter > 0) {
      throw new ServiceError('rate_limited', `Too many failed pairing attempts; try again in ${retryAfter} s.`, {
        headers: { 'retry-after': String(retryAfter) },
      });
    }
    // Keys are scoped per pairing code; the answer holds the new token, sealed with the code.
    const normalized = normalizePairingCode(body.code);
    const scope = `pair:${hashPairingCode(normalized ?? body.code).toString('hex')}`;
    const idempotency = idempotencyOf(request, scope, normalized ?? body.code);
    try {
      const early = idempotency ? priorAnswer(store, idempotency) : null;
      if (early) return sendStoredAnswer(reply, early);
      const result = await store.db.write((): StoredAnswer => {
        const prior = idempotency ? priorAnswer(store, idempotency) : null;
        if (prior) return { ...prior, headers: { ...prior.headers, 'idempotent-replayed': 'true' } };
        const { client, token } = pairClient(store, body.code, body.client_name);
        const answer: StoredAnswer = { status: 201, body: { ...toClientObject(client), token } };
        if (idempotency) storeAnswer(store, idempotency, services.config.idempotencyTtlMs, answer);
        return answer;
      });
      for (const [name, value] of Object.entries(result.headers ?? {})) reply.header(name, value);
      return reply.code(result.status).send(result.body);
    } catch (error) {
      if (error instanceof ServiceError && error.code === 'invalid_pairing_code') services.pairingLimiter.recordFailure(address);
      throw error;
    }
  });
}
