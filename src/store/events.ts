/**
 * A task's log: each task's events, numbered from 1 without gaps (LMSP 7.3). Delta events also
 * carry the token ids they cover, which makes them the resume snapshot (LMSP 7.5): the snapshot
 * is written in the same transaction as the deltas because it is the same row.
 *
 * Stored compactly (migration 0009): a delta event (one with tokens) whose payload has the
 * shape of its task's first delta of that type, that payload with one string left out, is a row
 * of that string, the shape's id and the tokens as varints; everything else is stored as its
 * type and its JSON payload. `after` rebuilds the JSON text byte for byte, so what clients read
 * does not depend on how a row was stored.
 */
import type { Statement } from 'better-sqlite3';
import type { LoggedEvent } from '../domain/tasks.js';
import type { Sqlite } from './db.js';
import { packTokens, unpackTokens } from './token-codec.js';

interface DbTaskEvent {
  sequence_number: number;
  type: string;
  created_at: number;
  data: string;
  prefix: string | null;
  suffix: string | null;
}

function toLoggedEvent(row: DbTaskEvent): LoggedEvent {
  const data = row.prefix === null ? row.data : `${row.prefix}${JSON.stringify(row.data)}${row.suffix ?? ''}`;
  return { sequenceNumber: row.sequence_number, type: row.type, createdAt: row.created_at, data };
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

/** A payload's JSON text around one string value left out. */
export interface Shape {
  prefix: string;
  suffix: string;
  path: string;
}

const HOLE = '\u0000lmsp:hole\u0000';

function pathStep(key: string | number): string {
  if (typeof key === 'number') return `[${key}]`;
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `.${key}` : `."${key.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

/** The path of the last string value in `value` (depth first, in key order), or null. */
function lastString(value: unknown, path: Array<string | number> = []): Array<string | number> | null {
  if (typeof value === 'string') return path;
  if (value === null || typeof value !== 'object') return null;
  const entries: Array<[string | number, unknown]> = Array.isArray(value) ? value.map((item, index) => [index, item]) : Object.entries(value);
  for (let index = entries.length - 1; index >= 0; index--) {
    const [key, item] = entries[index]!;
    const found = lastString(item, [...path, key]);
    if (found) return found;
  }
  return null;
}

function withHole(value: unknown, path: ReadonlyArray<string | number>): unknown {
  if (path.length === 0) return HOLE;
  const [key, ...rest] = path;
  if (Array.isArray(value)) return value.map((item, index) => (index === key ? withHole(item, rest) : item));
  return Object.fromEntries(Object.entries(value as object).map(([name, item]) => [name, name === key ? withHole(item, rest) : item]));
}

/**
 * The shape of a delta payload: its JSON text `json` with its last string value left out; null
 * where there is none, or where the text cannot be split around it unambiguously.
 */
export function shapeOf(json: string): Shape | null {
  const path = lastString(JSON.parse(json));
  if (!path || path.length === 0) return null;
  const marker = JSON.stringify(HOLE);
  const template = JSON.stringify(withHole(JSON.parse(json), path));
  const at = template.indexOf(marker);
  if (at < 0 || template.indexOf(marker, at + 1) >= 0) return null;
  const shape = { prefix: template.slice(0, at), suffix: template.slice(at + marker.length), path: `$${path.map(pathStep).join('')}` };
  return holeOf(shape, json) === null ? null : shape;
}

/** The string that fills `shape`'s hole to give exactly `json`, or null if `json` has another shape. */
export function holeOf(shape: Pick<Shape, 'prefix' | 'suffix'>, json: string): string | null {
  if (json.length < shape.prefix.length + shape.suffix.length + 2) return null;
  if (!json.startsWith(shape.prefix) || !json.endsWith(shape.suffix)) return null;
  const middle = json.slice(shape.prefix.length, json.length - shape.suffix.length);
  if (middle[0] !== '"') return null;
  let text: unknown;
  try {
    text = JSON.parse(middle);
  } catch {
    return null;
  }
  return typeof text === 'string' && JSON.stringify(text) === middle ? text : null;
}

/**
 * A query of the text of one task's `delta` events after a sequence number, concatenated in
 * order, as its one column `text`: `taskId` and `after` are SQL expressions (a parameter, a column).
 */
function textOfDeltas(delta: TextDelta, taskId: string, after: string): string {
  const path = quote(delta.path);
  return `SELECT group_concat(CASE
      WHEN l.shape IS NULL THEN json_extract(l.data, ${path})
      WHEN s.path = ${path} THEN l.data
      ELSE json_extract(s.prefix || json_quote(l.data) || s.suffix, ${path}) END, '' ORDER BY l.sequence_number) AS text
    FROM task_log l LEFT JOIN task_event_shapes s ON s.id = l.shape
    WHERE l.task_id = ${taskId} AND l.sequence_number > ${after} AND coalesce(l.type, s.type) = ${quote(delta.type)}`;
}

export class EventTable {
  private readonly appendStatement;
  private readonly appendShapedStatement;
  private readonly shapeStatement;
  private readonly insertShapeStatement;
  private readonly afterStatement;
  private readonly outputTextStatements = new Map<string, Statement<[string, number], { text: string | null }>>();
  private readonly outputTextsStatements = new Map<string, Statement<[string], { id: string; text: string | null }>>();
  private readonly tokensStatement;
  private readonly deleteStatement;
  private readonly deleteBatchStatement;
  private readonly deleteShapesStatement;
  private readonly deleteUnusedShapesStatement;

  constructor(private readonly db: Sqlite) {
    this.appendStatement = db.prepare(
      'INSERT INTO task_log (task_id, sequence_number, created_at, type, data, tokens) VALUES (?, ?, ?, ?, ?, ?)');
    this.appendShapedStatement = db.prepare(
      'INSERT INTO task_log (task_id, sequence_number, created_at, shape, data, tokens) VALUES (?, ?, ?, ?, ?, ?)');
    this.shapeStatement = db.prepare<[string, string], { id: number; prefix: string; suffix: string }>(
      'SELECT id, prefix, suffix FROM task_event_shapes WHERE task_id = ? AND type = ?');
    this.insertShapeStatement = db.prepare(
      'INSERT INTO task_event_shapes (task_id, type, prefix, suffix, path) VALUES (?, ?, ?, ?, ?)');
    this.afterStatement = db.prepare<[string, number, number], DbTaskEvent>(`
      SELECT l.sequence_number, coalesce(l.type, s.type) AS type, l.created_at, l.data, s.prefix, s.suffix
      FROM task_log l LEFT JOIN task_event_shapes s ON s.id = l.shape
      WHERE l.task_id = ? AND l.sequence_number > ? ORDER BY l.sequence_number LIMIT ?`);
    this.tokensStatement = db.prepare<[string, number], { tokens: Buffer }>(`
      SELECT tokens FROM task_log WHERE task_id = ? AND sequence_number > ? AND tokens IS NOT NULL
      ORDER BY sequence_number`);
    this.deleteStatement = db.prepare('DELETE FROM task_log WHERE task_id = ?');
    this.deleteBatchStatement = db.prepare(`
      DELETE FROM task_log WHERE task_id = ? AND sequence_number IN
        (SELECT sequence_number FROM task_log WHERE task_id = ? ORDER BY sequence_number LIMIT ?)`);
    this.deleteShapesStatement = db.prepare('DELETE FROM task_event_shapes WHERE task_id = ?');
    this.deleteUnusedShapesStatement = db.prepare(
      'DELETE FROM task_event_shapes WHERE task_id = ? AND NOT EXISTS (SELECT 1 FROM task_log WHERE task_id = ?)');
  }

  append(taskId: string, sequenceNumber: number, type: string, createdAt: number, payload: object, tokens: readonly number[] | null = null): void {
    const json = JSON.stringify(payload);
    if (tokens) {
      const packed = packTokens(tokens);
      let shape: { id: number; prefix: string; suffix: string } | undefined = this.shapeStatement.get(taskId, type);
      if (!shape) {
        const made = shapeOf(json);
        if (made) {
          const id = Number(this.insertShapeStatement.run(taskId, type, made.prefix, made.suffix, made.path).lastInsertRowid);
          shape = { id, ...made };
        }
      }
      const hole = shape ? holeOf(shape, json) : null;
      if (shape && hole !== null) {
        this.appendShapedStatement.run(taskId, sequenceNumber, createdAt, shape.id, hole, packed);
        return;
      }
      this.appendStatement.run(taskId, sequenceNumber, createdAt, type, json, packed);
      return;
    }
    this.appendStatement.run(taskId, sequenceNumber, createdAt, type, json, null);
  }

  after(taskId: string, afterSequence: number, limit: number): LoggedEvent[] {
    return this.afterStatement.all(taskId, afterSequence, limit).map(toLoggedEvent);
  }

  /** The text of a task's delta events after `afterSequence`, concatenated (LMSP 7.3). */
  outputText(taskId: string, afterSequence: number, delta: TextDelta): string {
    const key = `${delta.type}\u0000${delta.path}`;
    let statement = this.outputTextStatements.get(key);
    if (!statement) {
      statement = this.db.prepare<[string, number], { text: string | null }>(textOfDeltas(delta, '?', '?'));
      this.outputTextStatements.set(key, statement);
    }
    return statement.get(taskId, afterSequence)?.text ?? '';
  }

  /**
   * `outputText` of many tasks in one statement (recovery reads a window's at once), by task id;
   * a task without such events has ''.
   */
  outputTexts(tasks: ReadonlyArray<{ taskId: string; afterSequence: number }>, delta: TextDelta): Map<string, string> {
    if (tasks.length === 0) return new Map();
    const key = `${delta.type}\u0000${delta.path}`;
    let statement = this.outputTextsStatements.get(key);
    if (!statement) {
      statement = this.db.prepare<[string], { id: string; text: string | null }>(
        `SELECT j.value ->> 0 AS id, (${textOfDeltas(delta, 'j.value ->> 0', 'j.value ->> 1')}) AS text FROM json_each(?) AS j`);
      this.outputTextsStatements.set(key, statement);
    }
    const rows = statement.all(JSON.stringify(tasks.map((task) => [task.taskId, task.afterSequence])));
    return new Map(rows.map((row) => [row.id, row.text ?? '']));
  }

  /** The token ids of the delta events after `afterSequence`: the resume snapshot. */
  snapshotTokens(taskId: string, afterSequence: number): number[] {
    const tokens: number[] = [];
    for (const row of this.tokensStatement.iterate(taskId, afterSequence)) unpackTokens(row.tokens, tokens);
    return tokens;
  }

  deleteForTask(taskId: string): number {
    const deleted = this.deleteStatement.run(taskId).changes;
    this.deleteShapesStatement.run(taskId);
    return deleted;
  }

  /** Deletes up to `limit` of a task's events (the sweeper bounds each transaction); its shapes go with the last. */
  deleteSomeForTask(taskId: string, limit: number): number {
    const deleted = this.deleteBatchStatement.run(taskId, taskId, limit).changes;
    if (deleted < limit) this.deleteUnusedShapesStatement.run(taskId, taskId);
    return deleted;
  }
}
