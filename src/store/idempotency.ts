/**
 * Idempotency keys (LMSP section 8), written once for every POST. `runIdempotent` is the only
 * way an effect guarded by a key is made:
 *
 * 1. an early look-up: a known key answers at once (its stored answer, or 409/422), before any
 *    work is done;
 * 2. the caller's preparation (validation, hashing a file, counting tokens), outside any
 *    transaction;
 * 3. one BEGIN IMMEDIATE transaction that looks the key up again (two requests may race between
 *    1 and 3), runs the effect and records the key, its fingerprint and the answer with it, so
 *    no crash leaves one without the other.
 *
 * Keys are stored as their SHA-256. Answers that carry a secret (a new token, a pairing code) are
 * stored encrypted with a key derived from the raw Idempotency-Key and the request's own secret,
 * neither of which is ever stored: the data directory never holds a usable secret, yet the same
 * request can be answered the same way again.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ServiceError } from '../domain/errors.js';
import { FINAL_STATUSES, UNFINISHED_STATUSES } from '../domain/tasks.js';
import { nowSeconds } from '../time.js';
import type { Database, Sqlite, WriteContext } from './db.js';
import { oneOf } from './sql.js';

/** A request's Idempotency-Key, as the store keys it. */
export interface IdempotencyKey {
  /** Whose keys these are: `client:<id>`, or `pair:<code hash>` for pairing. */
  scope: string;
  /** SHA-256 of the raw key. */
  keyHash: string;
  /** SHA-256 of the method, the path and the canonical JSON of the body. */
  fingerprint: string;
  /** Set when the answer must be stored encrypted: key material derived from the request's secrets. */
  sealingKey: Buffer | null;
  /** How long the key and its answer are kept (`idempotency_ttl`). */
  ttlMs: number;
}

/** An answer stored for replay: the status, the headers worth repeating and the body. */
export interface StoredAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  /** A streaming create: a replay sends the task's events from the start. */
  streamTaskId?: string;
  /**
   * A plain create whose request died with the process while its task went on (LMSP 7.5, 8): a
   * replay waits for the task to finish and answers as the create would have.
   */
  awaitTaskId?: string;
}

/** What an effect records with its key. */
export type Recording =
  /** The finished answer; `expiresAt` (Unix seconds) may shorten how long it can be replayed. */
  | { answer: StoredAnswer; taskId?: string | null; expiresAt?: number }
  /** The request goes on after the transaction (a plain or streaming create); answered later. */
  | { inFlight: string };

export type IdempotentOutcome<R> = { replay: StoredAnswer } | { result: R };

const SEALED_PREFIX = 'sealed:v1:';

interface DbIdempotencyKey {
  scope: string;
  key: string;
  fingerprint: string;
  state: 'in_flight' | 'done';
  status_code: number | null;
  body: string | null;
  task_id: string | null;
  created_at: number;
  expires_at: number;
  /** Null in rows written before migration 0016: expires_at - created_at. */
  ttl_seconds: number | null;
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

function encodeAnswer(key: IdempotencyKey, answer: StoredAnswer): string {
  const text = JSON.stringify(answer);
  return key.sealingKey ? seal(text, key.sealingKey) : text;
}

/**
 * A key as the table holds it, for answering in place of the request that held it: only creates
 * (which make tasks) are in flight or name a task, and their answers are never sealed.
 */
function storedKey(row: StoredKeyRow): IdempotencyKey {
  return { scope: row.scope, keyHash: row.key, fingerprint: row.fingerprint, sealingKey: null, ttlMs: (row.ttl_seconds ?? row.expires_at - row.created_at) * 1000 };
}

/** Whether a stored answer is a pointer to this task (to wait for, or to stream) rather than the answer itself; pointers are never sealed. */
function pointsAt(body: string | null, taskId: string): boolean {
  if (body === null || body.startsWith(SEALED_PREFIX)) return false;
  const answer = JSON.parse(body) as StoredAnswer;
  return answer.awaitTaskId === taskId || answer.streamTaskId === taskId;
}

type StoredKeyRow = Pick<DbIdempotencyKey, 'scope' | 'key' | 'fingerprint' | 'created_at' | 'expires_at' | 'ttl_seconds'>;
const STORED_KEY_COLUMNS = 'k.scope, k.key, k.fingerprint, k.created_at, k.expires_at, k.ttl_seconds';

/**
 * A key outlives its `idempotency_ttl` while the request that holds it is still being answered,
 * while the task it made is unfinished, and for its time to live after that task finished: a
 * retry must not make a second task beside the first (LMSP 8), however long the first took (a
 * queue, a restart). A task deleted when it finished (`store: false`) moved the key's expiry
 * instead (`complete`). `@now` is the time of the look-up.
 */
const HELD = `(k.state = 'in_flight' OR EXISTS (SELECT 1 FROM tasks t WHERE t.id = k.task_id AND (${oneOf('t.status', UNFINISHED_STATUSES)}
  OR t.finished_at + coalesce(k.ttl_seconds, k.expires_at - k.created_at) > @now)))`;

export class IdempotencyTable {
  private readonly getStatement;
  private readonly putStatement;
  private readonly completeStatement;
  private readonly deleteStatement;
  private readonly pointingAtFinishedUnstoredStatement;
  private readonly pointingAtUnfinishedStatement;
  private readonly deleteExpiredStatement;
  private readonly countExpiredStatement;
  private readonly inFlightStatement;
  private readonly ofTaskStatement;

  constructor(db: Sqlite) {
    this.getStatement = db.prepare<{ scope: string; key: string; now: number }, DbIdempotencyKey>(
      `SELECT * FROM idempotency_keys k WHERE scope = @scope AND key = @key AND (expires_at > @now OR ${HELD})`);
    // An expired record may still be there (the sweeper has not run): it is replaced. One still
    // held (HELD) is never expired, so never replaced.
    this.putStatement = db.prepare(`
      INSERT INTO idempotency_keys (scope, key, fingerprint, state, status_code, body, task_id, created_at, expires_at, ttl_seconds)
      VALUES (@scope, @key, @fingerprint, @state, @status_code, @body, @task_id, @created_at, @expires_at, @ttl_seconds)
      ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, state = excluded.state,
        status_code = excluded.status_code, body = excluded.body, task_id = excluded.task_id,
        created_at = excluded.created_at, expires_at = excluded.expires_at, ttl_seconds = excluded.ttl_seconds`);
    this.completeStatement = db.prepare(
      "UPDATE idempotency_keys SET state = 'done', status_code = ?, body = ?, expires_at = max(expires_at, ?) WHERE scope = ? AND key = ?");
    this.deleteStatement = db.prepare('DELETE FROM idempotency_keys WHERE scope = ? AND key = ?');
    this.deleteExpiredStatement = db.prepare(`
      DELETE FROM idempotency_keys
      WHERE (scope, key) IN (SELECT scope, key FROM idempotency_keys k WHERE expires_at <= @now AND NOT ${HELD} LIMIT @limit)`);
    this.countExpiredStatement = db.prepare<{ now: number }, { n: number }>(`SELECT count(*) AS n FROM idempotency_keys k WHERE expires_at <= @now AND NOT ${HELD}`);
    this.inFlightStatement = db.prepare<[], StoredKeyRow & Pick<DbIdempotencyKey, 'task_id'>>(
      `SELECT ${STORED_KEY_COLUMNS}, k.task_id FROM idempotency_keys k WHERE state = 'in_flight'`);
    this.ofTaskStatement = db.prepare<[string], StoredKeyRow>(
      `SELECT ${STORED_KEY_COLUMNS} FROM idempotency_keys k WHERE task_id = ? LIMIT 1`);
    this.pointingAtFinishedUnstoredStatement = db.prepare<[], StoredKeyRow & Pick<DbIdempotencyKey, 'task_id' | 'body'>>(`
      SELECT ${STORED_KEY_COLUMNS}, k.task_id, k.body FROM idempotency_keys k CROSS JOIN tasks t ON t.id = k.task_id
      WHERE k.state = 'done' AND ${oneOf('t.status', FINAL_STATUSES)}
        AND (t.response_id IN (SELECT id FROM responses WHERE store = 0)
          OR t.completion_id IN (SELECT id FROM chat_completions WHERE store = 0))`);
    this.pointingAtUnfinishedStatement = db.prepare<[], Pick<DbIdempotencyKey, 'task_id' | 'body'>>(`
      SELECT k.task_id, k.body FROM idempotency_keys k CROSS JOIN tasks t ON t.id = k.task_id
      WHERE k.state = 'done' AND ${oneOf('t.status', UNFINISHED_STATUSES)}`);
  }

  /**
   * Tasks still unfinished whose key's stored answer points at them (a plain or streaming create
   * whose request died with the process): what must be settled in place of those requests.
   */
  pointingAtUnfinished(): string[] {
    return this.pointingAtUnfinishedStatement.all().flatMap((row) => (row.task_id !== null && pointsAt(row.body, row.task_id) ? [row.task_id] : []));
  }

  /**
   * Keys whose stored answer still points at a finished `store: false` task (a replay would wait
   * for it, or send its log) rather than holding the answer itself: left by a crash, or by a
   * recovery that has just ended the task. Such a task must not be deleted before its key gets
   * the answer, or a replay would find nothing (LMSP 8).
   */
  pointingAtFinishedUnstored(): Array<{ key: IdempotencyKey; taskId: string }> {
    return this.pointingAtFinishedUnstoredStatement.all().flatMap((row) => {
      // Pointers are never sealed: they hold no secret.
      return row.task_id !== null && pointsAt(row.body, row.task_id) ? [{ key: storedKey(row), taskId: row.task_id }] : [];
    });
  }

  /** The key that made a task, for completing it in place of a request that died with the process. */
  keyOfTask(taskId: string): IdempotencyKey | null {
    const row = this.ofTaskStatement.get(taskId);
    return row ? storedKey(row) : null;
  }

  /**
   * The earlier answer for this key, if any: 422 when the key came with another request, 409
   * while the first request is still being answered (LMSP section 8).
   */
  find(key: IdempotencyKey, now = nowSeconds()): StoredAnswer | null {
    const row = this.getStatement.get({ scope: key.scope, key: key.keyHash, now });
    if (!row) return null;
    if (row.fingerprint !== key.fingerprint) throw new ServiceError('idempotency_key_reused');
    if (row.state === 'in_flight') throw new ServiceError('idempotency_key_in_flight');
    return JSON.parse(unseal(row.body ?? '{}', key.sealingKey)) as StoredAnswer;
  }

  /** Keyed requests of this process between their look-up of the key and its recording. */
  private readonly underway = new Map<string, { fingerprint: string; settled: Promise<unknown> }>();

  /**
   * Runs `work` (the look-up of a key, the preparation of its effect, the transaction that
   * records it) as the only one underway with this key: the same request again waits for the one
   * before it and then finds its answer, rather than preparing the same effect twice (a
   * registration hashes the whole file); another request with the key is 422 at once.
   */
  async exclusively<T>(key: IdempotencyKey | null, work: () => Promise<T>): Promise<T> {
    if (!key) return work();
    const id = `${key.scope}\n${key.keyHash}`;
    for (let before = this.underway.get(id); before; before = this.underway.get(id)) {
      if (before.fingerprint !== key.fingerprint) throw new ServiceError('idempotency_key_reused');
      await before.settled.catch(() => undefined);
    }
    const settled = work();
    this.underway.set(id, { fingerprint: key.fingerprint, settled });
    try {
      return await settled;
    } finally {
      if (this.underway.get(id)?.settled === settled) this.underway.delete(id);
    }
  }

  /** Records the key with what the effect answered (inside the effect's transaction). */
  record(key: IdempotencyKey, recording: Recording, now = nowSeconds()): void {
    const ttlSeconds = Math.ceil(key.ttlMs / 1000);
    const expiresAt = now + ttlSeconds;
    const done = 'answer' in recording;
    this.putStatement.run({
      scope: key.scope,
      key: key.keyHash,
      fingerprint: key.fingerprint,
      state: done ? 'done' : 'in_flight',
      status_code: done ? recording.answer.status : null,
      body: done ? encodeAnswer(key, recording.answer) : null,
      task_id: done ? recording.taskId ?? null : recording.inFlight,
      created_at: now,
      expires_at: done && recording.expiresAt !== undefined ? Math.min(expiresAt, recording.expiresAt) : expiresAt,
      ttl_seconds: ttlSeconds,
    });
  }

  /**
   * The request that held the key in flight was answered: replays now get this answer, for at
   * least the key's time to live from now (a generation may have outlasted it).
   */
  complete(key: IdempotencyKey, answer: StoredAnswer, now = nowSeconds()): void {
    this.completeStatement.run(answer.status, encodeAnswer(key, answer), now + Math.ceil(key.ttlMs / 1000), key.scope, key.keyHash);
  }

  /** The request that held the key in flight ended without an answer (its client left): forget it. */
  release(key: IdempotencyKey): void {
    this.deleteStatement.run(key.scope, key.keyHash);
  }

  deleteExpired(now: number, limit: number): number {
    return this.deleteExpiredStatement.run({ now, limit }).changes;
  }

  /** How many keys a sweep at `now` would delete (`lmsp gc --dry-run`). */
  countExpired(now: number): number {
    return this.countExpiredStatement.get({ now })!.n;
  }

  /**
   * At startup: the requests that were still being answered died with the process. A key whose
   * task goes on (`answerOf` gives the answer a replay gets) keeps guarding it, so a retry never
   * makes a second task beside it (LMSP 8); the others are released.
   */
  settleInFlight(answerOf: (taskId: string | null) => StoredAnswer | null): { released: number; kept: number } {
    let released = 0;
    let kept = 0;
    for (const row of this.inFlightStatement.all()) {
      const answer = answerOf(row.task_id);
      if (answer) {
        this.complete(storedKey(row), answer);
        kept += 1;
      } else {
        this.release(storedKey(row));
        released += 1;
      }
    }
    return { released, kept };
  }
}

/**
 * Runs an effect guarded by an Idempotency-Key (see the top of this file). Without a key it is
 * the same preparation and transaction, with nothing recorded.
 */
export async function runIdempotent<P, R>(db: Database, table: IdempotencyTable, key: IdempotencyKey | null, steps: {
  prepare: () => P | Promise<P>;
  effect: (context: WriteContext, prepared: P) => { result: R; record: Recording };
}): Promise<IdempotentOutcome<R>> {
  return table.exclusively(key, async () => {
    if (key) {
      const early = table.find(key);
      if (early) return { replay: early };
    }
    const prepared = await steps.prepare();
    return db.write((context): IdempotentOutcome<R> => {
      if (key) {
        const prior = table.find(key);
        if (prior) return { replay: prior };
      }
      const { result, record } = steps.effect(context, prepared);
      if (key) table.record(key, record);
      return { result };
    });
  });
}
