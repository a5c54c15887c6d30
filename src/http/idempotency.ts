/**
 * The `Idempotency-Key` header of a POST (LMSP section 8), read into the key the store records
 * with the effect (src/store/idempotency.ts does the rest, once for every POST), and stored
 * answers sent again.
 */
import { createHash, hkdfSync } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../domain/errors.js';
import type { IdempotencyKey, StoredAnswer } from '../store/index.js';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/** JSON with object keys sorted at every level, so equal bodies have equal fingerprints. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, item]) => item !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/**
 * Reads and checks the Idempotency-Key header; null when the request has none. `scope` says
 * whose keys these are; `secret` is the request's own secret (its bearer token, a pairing code)
 * when the answer holds one: the stored answer is then sealed with a key derived from both.
 */
export function idempotencyKeyOf(request: FastifyRequest, scope: string, ttlMs: number, secret: string | null = null): IdempotencyKey | null {
  const header = request.headers['idempotency-key'];
  if (header === undefined) return null;
  const key = Array.isArray(header) ? header.join(',') : header;
  if (!KEY_PATTERN.test(key)) throw new ServiceError('invalid_idempotency_key', undefined, { param: 'Idempotency-Key' });
  const path = request.url.split('?')[0]!;
  const fingerprint = sha256Hex(`${request.method}\n${path}\n${canonicalJson(request.body ?? {})}`);
  const sealingKey = secret === null
    ? null
    : Buffer.from(hkdfSync('sha256', `${key}\u0000${secret}`, 'lmsp-idempotency', scope, 32));
  return { scope, keyHash: sha256Hex(key), fingerprint, sealingKey, ttlMs };
}

/** Sends a stored answer again, marked as a replay. */
export function sendStoredAnswer(reply: FastifyReply, answer: StoredAnswer): FastifyReply {
  reply.code(answer.status).header('idempotent-replayed', 'true');
  for (const [name, value] of Object.entries(answer.headers ?? {})) reply.header(name, value);
  return reply.send(answer.body ?? null);
}
