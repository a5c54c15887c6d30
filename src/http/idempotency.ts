/**
 * Idempotency keys on every POST (LMSP section 8). The key, the request's fingerprint and the
 * stored answer are written in the transaction of the effect itself (see the callers), so no
 * crash leaves one without the other.
 *
 * Keys are stored as their SHA-256. Answers that carry a secret (a new token, a pairing code) are
 * stored encrypted with a key derived from the raw Idempotency-Key and the request's own secret,
 * neither of which is ever stored: the data directory never holds a usable secret, yet the same
 * request can be answered the same way again.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../api/errors.js';
import type { IdempotencyRecord } from '../store/idempotency.js';
import type { Store } from '../store/index.js';
import { nowSeconds } from '../time.js';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
const SEALED_PREFIX = 'sealed:v1:';

export interface IdempotencyRequest {
  scope: string;
  /** SHA-256 of the raw key, as stored. */
  keyHash: string;
  fingerprint: string;
  /** Set when the answer must be stored encrypted: key material from the request's secrets. */
  sealingKey: Buffer | null;
}

/** Answers stored for replay: the status, the headers worth repeating and the body. */
export interface StoredAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  /** A streaming create: replay the task's events from the start. */
  streamTaskId?: string;
}

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
 * Reads and checks the Idempotency-Key header; null when the request has none.
 * `secret`: the request's own secret (bearer token, pairing code) when the answer holds one.
 */
export function idempotencyOf(request: FastifyRequest, scope: string, secret: string | null = null): IdempotencyRequest | null {
  const header = request.headers['idempotency-key'];
  if (header === undefined) return null;
  const key = Array.isArray(header) ? header.join(',') : header;
  if (!KEY_PATTERN.test(key)) throw new ServiceError('invalid_idempotency_key', undefined, { param: 'Idempotency-Key' });
  const path = request.url.split('?')[0]!;
  const fingerprint = sha256Hex(`${request.method}\n${path}\n${canonicalJson(request.body ?? {})}`);
  const sealingKey = secret === null
    ? null
    : Buffer.from(hkdfSync('sha256', `${key}\u0000${secret}`, 'lmsp-idempotency', scope, 32));
  return { scope, keyHash: sha256Hex(key), fingerprint, sealingKey };
}

function seal(text: string, key: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const data = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  return SEALED_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64');
}

function unseal(text: string, key: Buffer | null): string {
  if (!text.startsWith(SEALED_PREFIX)) return text;
  if (!key) throw new ServiceError('internal_error', 'A sealed idempotent answer cannot be opened.');
  const raw = Buffer.from(text.slice(SEALED_PREFIX.length), 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}

/**
 * The earlier answer for this key, if any: throws 422 when the key came with another request,
 * 409 while the first request is still being answered. Call it before the effect and again
 * inside the effect's transaction (two requests may race between the two).
 */
export function priorAnswer(store: Store, idempotency: IdempotencyRequest): StoredAnswer | null {
  const record = store.idempotency.get(idempotency.scope, idempotency.keyHash, nowSeconds());
  if (!record) return null;
  if (record.fingerprint !== idempotency.fingerprint) throw new ServiceError('idempotency_key_reused');
  if (record.state === 'in_flight') throw new ServiceError('idempotency_key_in_flight');
  return JSON.parse(unseal(record.body ?? '{}', idempotency.sealingKey)) as StoredAnswer;
}

function recordOf(idempotency: IdempotencyRequest, ttlMs: number, state: IdempotencyRecord['state'], answer: StoredAnswer | null,
  taskId: string | null): IdempotencyRecord {
  const now = nowSeconds();
  const text = answer ? JSON.stringify(answer) : null;
  return {
    scope: idempotency.scope,
    key: idempotency.keyHash,
    fingerprint: idempotency.fingerprint,
    state,
    statusCode: answer?.status ?? null,
    body: text && idempotency.sealingKey ? seal(text, idempotency.sealingKey) : text,
    taskId,
    createdAt: now,
    expiresAt: now + Math.ceil(ttlMs / 1000),
  };
}

/** Records the finished answer; call inside the effect's transaction. */
export function storeAnswer(store: Store, idempotency: IdempotencyRequest, ttlMs: number, answer: StoredAnswer, taskId: string | null = null): void {
  store.idempotency.put(recordOf(idempotency, ttlMs, 'done', answer, taskId));
}

/** Marks the key as taken by a request still being answered (plain and streaming creates). */
export function storeInFlight(store: Store, idempotency: IdempotencyRequest, ttlMs: number, taskId: string): void {
  store.idempotency.put(recordOf(idempotency, ttlMs, 'in_flight', null, taskId));
}

export function completeInFlight(store: Store, idempotency: IdempotencyRequest, answer: StoredAnswer): void {
  const text = JSON.stringify(answer);
  store.idempotency.complete(idempotency.scope, idempotency.keyHash, answer.status,
    idempotency.sealingKey ? seal(text, idempotency.sealingKey) : text);
}

export function releaseKey(store: Store, idempotency: IdempotencyRequest): void {
  store.idempotency.delete(idempotency.scope, idempotency.keyHash);
}

/** Sends a stored answer again, marked as a replay. */
export function sendStoredAnswer(reply: FastifyReply, answer: StoredAnswer): FastifyReply {
  reply.code(answer.status).header('idempotent-replayed', 'true');
  for (const [name, value] of Object.entries(answer.headers ?? {})) reply.header(name, value);
  return reply.send(answer.body ?? null);
}
