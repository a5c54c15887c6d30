/** The use cases of pairing and clients (LMSP section 4). */
import type { ClientObject, ListObject, PairingCodeObject } from '../api/types.js';
import { toClientObject } from '../api/views.js';
import { createPairingCode, ensureOperatorToken, pairClient as claimCodeForClient } from '../auth/clients.js';
import type { Scope } from '../domain/clients.js';
import { invalidRequest, ServiceError } from '../domain/errors.js';
import type { IdempotencyKey, StoredAnswer } from '../store/index.js';
import { nowSeconds } from '../time.js';
import type { TaskCore } from './core.js';

type StoreDeps = Pick<TaskCore, 'store'>;
type PairingDeps = Pick<TaskCore, 'store' | 'pairingKey'>;

export interface PairingCodeRequest {
  name?: string | null;
  scopes?: readonly Scope[];
  ttlMs?: number;
}

/** Makes a single-use pairing code (only its hash is stored) with the key's answer, in one transaction. */
export async function issuePairingCode(deps: PairingDeps, request: PairingCodeRequest,
  key: IdempotencyKey | null, actor: string | null = null): Promise<{ replay: StoredAnswer } | { code: PairingCodeObject }> {
  const outcome = await deps.store.idempotent(key, {
    actor,
    prepare: () => undefined,
    effect: () => {
      const issued = createPairingCode(deps.store, deps.pairingKey, request);
      const code: PairingCodeObject = { object: 'pairing_code', code: issued.code, name: issued.name, scopes: issued.scopes, expires_at: issued.expiresAt };
      return { result: code, record: { answer: { status: 201, body: code } } };
    },
  });
  return 'replay' in outcome ? outcome : { code: outcome.result };
}

export type PairedClient = ClientObject & { token: string };

/**
 * Exchanges a pairing code for a client and its token, with the key's answer, in one
 * transaction. The answer holds the token, so a replay works only until the code itself would
 * have expired (LMSP section 4), never for the whole idempotency period.
 */
export async function pairWithCode(deps: PairingDeps, code: string, clientName: string,
  key: IdempotencyKey | null): Promise<{ replay: StoredAnswer } | { client: PairedClient }> {
  const outcome = await deps.store.idempotent(key, {
    prepare: () => undefined,
    effect: () => {
      const { client, token, codeExpiresAt } = claimCodeForClient(deps.store, deps.pairingKey, code, clientName);
      const paired: PairedClient = { ...toClientObject(client), token };
      return { result: paired, record: { answer: { status: 201, body: paired }, expiresAt: codeExpiresAt } };
    },
  });
  return 'replay' in outcome ? outcome : { client: outcome.result };
}

export function listClients(deps: StoreDeps): ClientObject[] {
  return deps.store.clients.list().map(toClientObject);
}

/** A page of `GET /v1/clients`, in the list shape of `GET /v1/tasks`; `after` must name a client. */
export function clientsPage(deps: StoreDeps, request: { limit: number; after: string | null; order: 'asc' | 'desc' }):
  ListObject<ClientObject> & { first_id: string | null; last_id: string | null } {
  const after = request.after === null ? null : deps.store.clients.get(request.after);
  if (request.after !== null && !after) throw invalidRequest('after', `No client with id '${request.after}'.`);
  const { clients, hasMore } = deps.store.clients.page({ after, limit: request.limit, order: request.order });
  const data = clients.map(toClientObject);
  return { object: 'list', data, has_more: hasMore, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
}

/**
 * Revokes a client: its token stops working at once; its records stay. Revoking the local
 * operator's client replaces its token file in `dataDir` at once, under a new operator client:
 * the leaked or unwanted token is dead, and the CLI goes on working without a restart (LMSP 4).
 */
export async function revokeClient(deps: StoreDeps, id: string, dataDir: string): Promise<ClientObject> {
  const revoked = await deps.store.db.write(() => {
    if (!deps.store.clients.get(id)) throw new ServiceError('not_found', `No client with id '${id}'.`, { param: 'id' });
    deps.store.clients.revoke(id, nowSeconds());
    return deps.store.clients.get(id)!;
  });
  if (revoked.kind === 'operator') ensureOperatorToken(deps.store, dataDir);
  return toClientObject(revoked);
}
