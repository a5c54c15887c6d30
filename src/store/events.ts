/**
 * The `task_events` table: each task's log, numbered from 1 without gaps (LMSP 7.3). Delta
 * events also carry the token ids they cover, which makes them the resume snapshot (LMSP 7.5):
 * the snapshot is written in the same transaction as the deltas because it is the same row.
 */
import type { Statement } from 'better-sqlite3';
import type { LoggedEvent } from '../domain/tasks.js';
import type { Sqlite } from './db.js';

interface DbTaskEvent {
  task_id: string;
  sequence_number: number;
  type: string;
  created_at: number;
  data: string;
}

function toLoggedEvent(row: DbTaskEvent): LoggedEvent {
  return { sequenceNumber: row.sequence_number, type: row.type, createdAt: row.created_at, data: row.data };
}

/** Which events carry a kind's generated text, and the JSON path of the text in their payload. */
export interface TextDelta {
  type: string;
  path: string;
}

/** An SQL string literal (the text is ours, never a client's). */
function quote(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

function encodeTokens(tokens: readonly number[]): Buffer {
  const buffer = Buffer.alloc(tokens.length * 4);
  tokens.forEach((token, index) => buffer.writeUInt32LE(token, index * 4));
  return buffer;
}

export class EventTable {
  private readonly appendStatement;
  private readonly afterStatement;
  private readonly outputTextStatements = new Map<string, Statement<[string, number], { text: string | null }>>();
  private readonly tokensStatement;
  private readonly deleteStatement;
  private readonly deleteBatchStatement;

  constructor(private readonly db: Sqlite) {
    this.appendStatement = db.prepare(
      'INSERT INTO task_events (task_id, sequence_number, type, created_at, data, tokens) VALUES (?, ?, ?, ?, ?, ?)');
    this.afterStatement = db.prepare<[string, number, number], DbTaskEvent>(`
      SELECT task_id, sequence_number, type, created_at, data FROM task_events
      WHERE task_id = ? AND sequence_number > ? ORDER BY sequence_number LIMIT ?`);
    this.tokensStatement = db.prepare<[string, number], { tokens: Buffer }>(`
      SELECT tokens FROM task_events WHERE task_id = ? AND sequence_number > ? AND tokens IS NOT NULL
      ORDER BY sequence_number`);
    this.deleteStatement = db.prepare('DELETE FROM task_events WHERE task_id = ?');
    this.deleteBatchStatement = db.prepare(`
      DELETE FROM task_events WHERE task_id = ? AND sequence_number IN
        (SELECT sequence_number FROM task_events WHERE task_id = ? ORDER BY sequence_number LIMIT ?)`);
  }

  append(taskId: string, sequenceNumber: number, type: string, createdAt: number, payload: object, tokens: readonly number[] | null = null): void {
    this.appendStatement.run(taskId, sequenceNumber, type, createdAt, JSON.stringify(payload), tokens ? encodeTokens(tokens) : null);
  }

  after(taskId: string, afterSequence: number, limit: number): LoggedEvent[] {
    return this.afterStatement.all(taskId, afterSequence, limit).map(toLoggedEvent);
  }

  /** The text of a task's delta events after `afterSequence`, concatenated (LMSP 7.3). */
  outputText(taskId: string, afterSequence: number, delta: TextDelta): string {
    const key = `${delta.type}\u0000${delta.path}`;
    let statement = this.outputTextStatements.get(key);
    if (!statement) {
      statement = this.db.prepare<[string, number], { text: string | null }>(`
        SELECT group_concat(json_extract(data, ${quote(delta.path)}), '' ORDER BY sequence_number) AS text FROM task_events
        WHERE task_id = ? AND sequence_number > ? AND type = ${quote(delta.type)}`);
      this.outputTextStatements.set(key, statement);
    }
    return statement.get(taskId, afterSequence)?.text ?? '';
  }

  /** The token ids of the delta events after `afterSequence`: the resume snapshot. */
  snapshotTokens(taskId: string, afterSequence: number): number[] {
    const tokens: number[] = [];
    for (const row of this.tokensStatement.iterate(taskId, afterSequence)) {
      for (let offset = 0; offset < row.tokens.length; offset += 4) tokens.push(row.tokens.readUInt32LE(offset));
    }
    return tokens;
  }

  deleteForTask(taskId: string): number {
    return this.deleteStatement.run(taskId).changes;
  }

  /** Deletes up to `limit` of a task's events (the sweeper bounds each transaction). */
  deleteSomeForTask(taskId: string, limit: number): number {
    return this.deleteBatchStatement.run(taskId, taskId, limit).changes;
  }
}
