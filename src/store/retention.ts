/**
 * Retention (LMSP section 10 and 11.2): finished tasks older than the retention period are
 * deleted with their events and their response, at most `maxRows` rows a transaction so that
 * requests are never blocked for long. Unfinished tasks are never selected, however old: the
 * queries below only ever see rows with `finished_at` set, which only final states have.
 */
import { FINAL_STATUSES } from '../domain/tasks.js';
import type { Sqlite } from './db.js';
import type { EventTable } from './events.js';
import { oneOf } from './sql.js';

const FINAL = oneOf('status', FINAL_STATUSES);
const FINAL_T = oneOf('t.status', FINAL_STATUSES);

export const SWEEP_BATCH_ROWS = 1000;

export interface SweepCounts {
  tasks: number;
  events: number;
  idempotencyKeys: number;
  pairingCodes: number;
}

/** Counts of a sweep that deleted nothing. */
export function noneSwept(): SweepCounts {
  return { tasks: 0, events: 0, idempotencyKeys: 0, pairingCodes: 0 };
}

/** Whether a sweep deleted anything at all. */
export function sweptAnything(counts: SweepCounts): boolean {
  return counts.tasks + counts.events + counts.idempotencyKeys + counts.pairingCodes > 0;
}

/** A finished task the sweep may delete, with the length of its log. */
interface Candidate {
  id: string;
  response_id: string | null;
  completion_id: string | null;
  last_sequence_number: number;
}

export class RetentionTable {
  private readonly oldFinishedStatement;
  private readonly ephemeralFinishedStatement;
  private readonly deleteTaskStatement;
  private readonly deleteResponseStatement;
  private readonly ephemeralCompletionsStatement;
  private readonly deleteCompletionStatement;
  private readonly countOldStatement;
  private readonly countEphemeralStatement;
  private readonly anythingExpiredStatement;
  private readonly sweptLogsStatement;
  private readonly markSweptLogStatement;
  private readonly unmarkSweptLogStatement;
  private readonly countSweptLogsStatement;

  constructor(db: Sqlite, private readonly events: EventTable) {
    this.sweptLogsStatement = db.prepare<[number], string>('SELECT task_id FROM swept_task_logs LIMIT ?').pluck();
    this.markSweptLogStatement = db.prepare('INSERT OR IGNORE INTO swept_task_logs (task_id) VALUES (?)');
    this.unmarkSweptLogStatement = db.prepare('DELETE FROM swept_task_logs WHERE task_id = ?');
    this.countSweptLogsStatement = db.prepare<[], { tasks: number; events: number | null }>(`
      SELECT count(DISTINCT s.task_id) AS tasks, count(l.sequence_number) AS events
      FROM swept_task_logs s LEFT JOIN task_log l ON l.task_id = s.task_id`);
    this.oldFinishedStatement = db.prepare<[number, number], Candidate>(`
      SELECT id, response_id, completion_id, last_sequence_number FROM tasks
      WHERE finished_at IS NOT NULL AND finished_at < ? AND ${FINAL}
      ORDER BY finished_at LIMIT ?`);
    this.ephemeralFinishedStatement = db.prepare<[number], Candidate>(`
      SELECT t.id, t.response_id, NULL AS completion_id, t.last_sequence_number FROM responses r JOIN tasks t ON t.response_id = r.id
      WHERE r.store = 0 AND ${FINAL_T} LIMIT ?`);
    // LMSP 13: `store: false` chat completions, left finished by a crash before they were deleted.
    this.ephemeralCompletionsStatement = db.prepare<[number], Candidate>(`
      SELECT t.id, NULL AS response_id, t.completion_id, t.last_sequence_number FROM chat_completions c JOIN tasks t ON t.completion_id = c.id
      WHERE c.store = 0 AND ${FINAL_T} LIMIT ?`);
    this.deleteCompletionStatement = db.prepare('DELETE FROM chat_completions WHERE id = ?');
    this.deleteTaskStatement = db.prepare(`DELETE FROM tasks WHERE id = ? AND ${FINAL}`);
    this.deleteResponseStatement = db.prepare('DELETE FROM responses WHERE id = ?');
    this.countOldStatement = db.prepare<[number], { tasks: number; events: number | null }>(`
      SELECT count(*) AS tasks, sum(last_sequence_number) AS events FROM tasks
      WHERE finished_at IS NOT NULL AND finished_at < ? AND ${FINAL}`);
    this.countEphemeralStatement = db.prepare<[], { tasks: number; events: number | null }>(`
      SELECT count(*) AS tasks, sum(t.last_sequence_number) AS events FROM tasks t
      WHERE ${FINAL_T} AND (t.response_id IN (SELECT id FROM responses WHERE store = 0)
        OR t.completion_id IN (SELECT id FROM chat_completions WHERE store = 0))`);
    // Every branch is an indexed probe that stops at the first row: cheap enough to ask before
    // deciding whether a sweep is worth starting at all.
    this.anythingExpiredStatement = db.prepare<{ cutoff: number | null; now: number }, number>(`
      SELECT EXISTS (SELECT 1 FROM tasks WHERE @cutoff IS NOT NULL AND finished_at IS NOT NULL AND finished_at < @cutoff
                       AND ${FINAL})
          OR EXISTS (SELECT 1 FROM responses r JOIN tasks t ON t.response_id = r.id
                     WHERE r.store = 0 AND ${FINAL_T})
          OR EXISTS (SELECT 1 FROM chat_completions c JOIN tasks t ON t.completion_id = c.id
                     WHERE c.store = 0 AND ${FINAL_T})
          OR EXISTS (SELECT 1 FROM swept_task_logs)
          OR EXISTS (SELECT 1 FROM idempotency_keys WHERE expires_at <= @now)
          OR EXISTS (SELECT 1 FROM pairing_codes WHERE expires_at < @now)`).pluck();
  }

  /** Whether a sweep at `now` with this cutoff would delete anything at all. */
  anythingExpired(cutoff: number | null, now: number): boolean {
    return this.anythingExpiredStatement.get({ cutoff, now }) === 1;
  }

  /**
   * Deletes up to `maxRows` rows of expired (or `store: false`) finished tasks, oldest task first,
   * inside the caller's transaction; `cutoff` null: retention is forever. A task whose log fits
   * in what is left of the batch goes whole: its events, then its task and response rows. A
   * longer one loses its task and response rows first (so no client ever reads it with part of
   * its log gone), and its log is deleted by this and the next batches.
   */
  sweepBatch(cutoff: number | null, maxRows: number): { tasks: number; events: number } {
    let rows = 0;
    let tasks = 0;
    let events = 0;
    for (const taskId of this.sweptLogsStatement.all(maxRows)) {
      const deleted = this.events.deleteSomeForTask(taskId, maxRows - rows);
      rows += deleted;
      events += deleted;
      if (rows >= maxRows) return { tasks, events };
      this.unmarkSweptLogStatement.run(taskId);
    }
    const candidates = [
      ...this.ephemeralFinishedStatement.all(maxRows),
      ...this.ephemeralCompletionsStatement.all(maxRows),
      ...(cutoff === null ? [] : this.oldFinishedStatement.all(cutoff, maxRows)),
    ];
    for (const candidate of candidates) {
      if (rows + 3 > maxRows) break;
      const whole = candidate.last_sequence_number + 3 <= maxRows - rows;
      if (whole) {
        const deleted = this.events.deleteSomeForTask(candidate.id, maxRows - rows);
        rows += deleted;
        events += deleted;
      }
      if (this.deleteTaskStatement.run(candidate.id).changes > 0) {
        if (candidate.response_id !== null) this.deleteResponseStatement.run(candidate.response_id);
        if (candidate.completion_id !== null) this.deleteCompletionStatement.run(candidate.completion_id);
        if (!whole) this.markSweptLogStatement.run(candidate.id);
        rows += 3;
        tasks += 1;
      }
    }
    return { tasks, events };
  }

  /** What a sweep would delete now (`lmsp gc --dry-run`). */
  countExpired(cutoff: number | null): { tasks: number; events: number } {
    const ephemeral = this.countEphemeralStatement.get()!;
    const old = cutoff === null ? { tasks: 0, events: 0 } : this.countOldStatement.get(cutoff)!;
    // The logs of tasks already deleted: only their events are left to count.
    const swept = this.countSweptLogsStatement.get()!;
    return { tasks: ephemeral.tasks + old.tasks, events: (ephemeral.events ?? 0) + (old.events ?? 0) + (swept.events ?? 0) };
  }
}
