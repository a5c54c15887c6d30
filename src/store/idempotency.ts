/**
 * The `idempotency_keys` table (LMSP section 8). A key is written in the same transaction as the
 * effect it guards (the task, the cancel, the registration), so no crash leaves one without the
 * other.
 */
import type { Sqlite } from './db.js';

export interface IdempotencyRecord {
  scope: string;
  key: string;
  fingerprint: string;
  state: 'in_flight' | 'done';
  statusCode: number | null;
  body: string | null;
  taskId: string | null;
  createdAt: number;
  expiresAt: number;
}

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
}

function toRecord(row: DbIdempotencyKey): IdempotencyRecord {
  return {
    scope: row.scope,
    key: row.key,
    fingerprint: row.fingerprint,
    state: row.state,
    statusCode: row.status_code,
    body: row.body,
    taskId: row.task_id,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
  };
}

export class IdempotencyTable {
  private readonly getStatement;
  private readonly insertStatement;
  private readonly completeStatement;
  private readonly deleteStatement;
  private readonly deleteExpiredStatement;
  private readonly releaseInFlightStatement;

  constructor(db: Sqlite) {
    this.getStatement = db.prepare<[string, string, number], DbIdempotencyKey>(
      'SELECT * FROM idempotency_keys WHERE scope = ? AND key = ? AND expires_at > ?');
    this.insertStatement = db.prepare(`
      INSERT INTO idempotency_keys (scope, key, fingerprint, state, status_code, body, task_id, created_at, expires_at)
      VALUES (@scope, @key, @fingerprint, @state, @status_code, @body, @task_id, @created_at, @expires_at)
      ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, state = excluded.state,
        status_code = excluded.status_code, body = excluded.body, task_id = excluded.task_id,
        created_at = excluded.created_at, expires_at = excluded.expires_at`);
    this.completeStatement = db.prepare(
      "UPDATE idempotency_keys SET state = 'done', status_code = ?, body = ? WHERE scope = ? AND key = ?");
    this.deleteStatement = db.prepare('DELETE FROM idempotency_keys WHERE scope = ? AND key = ?');
    this.deleteExpiredStatement = db.prepare(`
      DELETE FROM idempotency_keys
      WHERE (scope, key) IN (SELECT scope, key FROM idempotency_keys WHERE expires_at <= ? LIMIT ?)`);
    this.releaseInFlightStatement = db.prepare("DELETE FROM idempotency_keys WHERE state = 'in_flight'");
  }

  /** The live (unexpired) record for this key, if any. */
  get(scope: string, key: string, now: number): IdempotencyRecord | null {
    const row = this.getStatement.get(scope, key, now);
    return row ? toRecord(row) : null;
  }

  /** Writes (or replaces an expired) record. */
  put(record: IdempotencyRecord): void {
    this.insertStatement.run({
      scope: record.scope,
      key: record.key,
      fingerprint: record.fingerprint,
      state: record.state,
      status_code: record.statusCode,
      body: record.body,
      task_id: record.taskId,
      created_at: record.createdAt,
      expires_at: record.expiresAt,
    });
  }

  complete(scope: string, key: string, statusCode: number, body: string): void {
    this.completeStatement.run(statusCode, body, scope, key);
  }

  delete(scope: string, key: string): void {
    this.deleteStatement.run(scope, key);
  }

  deleteExpired(now: number, limit: number): number {
    return this.deleteExpiredStatement.run(now, limit).changes;
  }

  /** At startup: requests that were still running died with the process (issue: keys released). */
  releaseInFlight(): number {
    return this.releaseInFlightStatement.run().changes;
  }
}
