/**
 * Pairing and client management (LMSP section 4): codes made by the operator, exchanged once for
 * a token, and the operator's own token kept in the data directory for the local CLI.
 */
import { existsSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SCOPES, type Client, type Scope } from '../domain/clients.js';
import { ServiceError } from '../domain/errors.js';
import { newId } from '../ids.js';
import type { Store } from '../store/index.js';
import { nowSeconds } from '../time.js';
import { hashPairingCode, looksLikeToken, newPairingCode, newToken, normalizePairingCode, sha256 } from './secrets.js';
import { readPrivateFile, writeNewPrivateFile } from './private-file.js';

export const OPERATOR_TOKEN_FILE = 'operator.token';
export const DEFAULT_PAIRING_TTL_MS = 10 * 60_000;

export interface IssuedPairingCode {
  code: string;
  name: string | null;
  scopes: Scope[];
  expiresAt: number;
}

/** Makes a single-use pairing code; only its keyed hash is stored. Runs in the caller's transaction. */
export function createPairingCode(store: Store, pairingKey: Buffer, options: { name?: string | null; scopes?: readonly Scope[]; ttlMs?: number }): IssuedPairingCode {
  const code = newPairingCode();
  const now = nowSeconds();
  const scopes = [...new Set(options.scopes ?? DEFAULT_SCOPES)];
  const expiresAt = now + Math.max(1, Math.round((options.ttlMs ?? DEFAULT_PAIRING_TTL_MS) / 1000));
  store.pairingCodes.insert(hashPairingCode(normalizePairingCode(code)!, pairingKey), { name: options.name ?? null, scopes, createdAt: now, expiresAt });
  return { code, name: options.name ?? null, scopes, expiresAt };
}

/**
 * Exchanges a code for a new client and its token, in one transaction (the code is claimed by a
 * conditional update, so it can be used once). Wrong, used and expired codes look the same.
 */
export function pairClient(store: Store, pairingKey: Buffer, code: string, clientName: string): { client: Client; token: string; codeExpiresAt: number } {
  const normalized = normalizePairingCode(code);
  const clientId = newId('cli');
  const now = nowSeconds();
  const claimed = normalized ? store.pairingCodes.claim(hashPairingCode(normalized, pairingKey), clientId, now) : null;
  if (!claimed) throw new ServiceError('invalid_pairing_code');
  const token = newToken();
  const client: Client = {
    id: clientId, name: clientName, scopes: claimed.scopes, kind: 'paired', createdAt: now, lastUsedAt: null, revokedAt: null,
  };
  store.clients.insert(client, sha256(token));
  return { client, token, codeExpiresAt: claimed.expiresAt };
}

/** The client a bearer token belongs to, if it is a live one. */
export function authenticate(store: Store, token: string): Client | null {
  if (!looksLikeToken(token)) return null;
  const client = store.clients.findByTokenHash(sha256(token));
  return client && client.revokedAt === null ? client : null;
}

/**
 * Makes sure the local operator has a working admin token in `<data-dir>/operator.token`
 * (mode 0600), so the CLI never needs a token copied by hand (LMSP section 4).
 */
export function ensureOperatorToken(store: Store, dataDir: string): Client {
  const path = join(dataDir, OPERATOR_TOKEN_FILE);
  if (existsSync(path)) {
    const existing = authenticate(store, readPrivateFile(path).toString('utf8').trim());
    if (existing && existing.kind === 'operator') return existing;
  }
  const token = newToken();
  const temporary = `${path}.${process.pid}.tmp`;
  // Made new, then renamed into place.
  writeNewPrivateFile(temporary, `${token}\n`);
  const client = store.db.transaction(() => {
    const operator = store.clients.operator();
    if (operator) {
      store.clients.replaceToken(operator.id, sha256(token));
      return operator;
    }
    const created: Client = {
      id: newId('cli'), name: 'operator', scopes: ['admin'], kind: 'operator', createdAt: nowSeconds(), lastUsedAt: null, revokedAt: null,
    };
    store.clients.insert(created, sha256(token));
    return created;
  });
  renameSync(temporary, path);
  return client;
}

export function readOperatorToken(dataDir: string): string | null {
  const path = join(dataDir, OPERATOR_TOKEN_FILE);
  return existsSync(path) ? readPrivateFile(path).toString('utf8').trim() : null;
}
