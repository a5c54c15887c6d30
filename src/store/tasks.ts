/** The `tasks` table. Status changes are made only through the lifecycle (task-lifecycle.ts). */
import type { TaskErrorCode } from '../domain/errors.js';
import type { ResponseHeader } from '../domain/responses.js';
import { PULL_KINDS, UNFINISHED_STATUSES, type FinishReason, type RestartPolicy, type Task, type TaskKind, type TaskStatus } from '../domain/tasks.js';
import type { Sqlite } from './db.js';
import { changedAtRecoverySql, oneOf, unchangedAtRecoverySql } from './sql.js';
import { RESPONSE_HEADER_COLUMNS, toResponseHeader, type DbResponseHeader } from './responses.js';

export interface DbTask {
  seq: number;
  id: string;
  kind: TaskKind;
  response_id: string | null;
  completion_id: string | null;
  client_id: string;
  model: string;
  status: TaskStatus;
  on_restart: RestartPolicy;
  attempt: number;
  restarts: number;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  last_sequence_number: number;
  output_start_seq: number;
  input_tokens: number | null;
  output_tokens: number;
  finish_reason: FinishReason | null;
  error_code: TaskErrorCode | null;
  error_message: string | null;
}

export function toTask(row: DbTask): Task {
  return {
    seq: row.seq,
    id: row.id,
    kind: row.kind,
    responseId: row.response_id,
    completionId: row.completion_id,
    clientId: row.client_id,
    model: row.model,
    status: row.status,
    onRestart: row.on_restart,
    attempt: row.attempt,
    restarts: row.restarts,
    createdAt: row.created_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    lastSequenceNumber: row.last_sequence_number,
    outputStartSeq: row.output_start_seq,
    inputTokens: row.input_tokens,
    outputTokens: row.output_tokens,
    finishReason: row.finish_reason,
    error: row.error_code ? { code: row.error_code, message: row.error_message ?? '' } : null,
  };
}

function toParams(task: Task) {
  return {
    id: task.id,
    kind: task.kind,
    response_id: task.responseId,
    completion_id: task.completionId,
    client_id: task.clientId,
    model: task.model,
    status: task.status,
    on_restart: task.onRestart,
    attempt: task.attempt,
    restarts: task.restarts,
    created_at: task.createdAt,
    started_at: task.startedAt,
    finished_at: task.finishedAt,
    last_sequence_number: task.lastSequenceNumber,
    output_start_seq: task.outputStartSeq,
    input_tokens: task.inputTokens,
    output_tokens: task.outputTokens,
    finish_reason: task.finishReason,
    error_code: task.error?.code ?? null,
    error_message: task.error?.message ?? null,
  };
}

export interface TaskListQuery {
  /** Only this client's tasks; null for all (admin). */
  clientId: string | null;
  statuses: TaskStatus[] | null;
  /** Only tasks of these kinds; null for every kind. */
  kinds?: TaskKind[] | null;
  /** Cursor: tasks after this one in the list's order. */
  afterSeq: number | null;
  limit: number;
  order: 'asc' | 'desc';
}

const COLUMNS = `id, kind, response_id, completion_id, client_id, model, status, on_restart, attempt, restarts, created_at, started_at,
  finished_at, last_sequence_number, output_start_seq, input_tokens, output_tokens, finish_reason, error_code, error_message`;

/**
 * What `updateMany` writes, in the order of each row's values; the last two find the task (by its
 * position, the table's key: measured, a fifth faster than through the index of ids).
 */
const UPDATE_MANY_FIELDS = ['status', 'attempt', 'restarts', 'started_at', 'finished_at', 'last_sequence_number', 'output_start_seq',
  'input_tokens', 'output_tokens', 'finish_reason', 'error_code', 'error_message', 'seq', 'expected_status'] as const;

export class TaskTable {
  private readonly insertStatement;
  private readonly getStatement;
  private readonly getByResponseStatement;
  private readonly getByCompletionStatement;
  private readonly updateStatement;
  private readonly updateManyStatement;
  private readonly listAscStatement;
  private readonly listDescStatement;
  private readonly nextRunnableStatement;
  private readonly toRecoverStatement;
  /** Which table and column each of `toRecoverStatement`'s values comes from, in order. */
  private readonly toRecoverColumns: ReadonlyArray<{ table: 'tasks' | 'responses'; name: string }>;
  private readonly maxSeqStatement;
  private readonly unfinishedUnstoredStatement;
  private readonly countUnchangedAtRecoveryStatement;
  private readonly unfinishedForModelStatement;
  private readonly deleteStatement;
  private readonly countByStatusStatement;
  private readonly unfinishedForClientStatement;
  private readonly oldestQueuedOfClientStatement;
  private readonly clientsWithQueuedStatement;

  constructor(db: Sqlite) {
    // The generation slots never take a pull: pulls have workers of their own (LMSP 5.1).
    const pullTask = oneOf('kind', PULL_KINDS);
    this.insertStatement = db.prepare(`INSERT INTO tasks (${COLUMNS}) VALUES (${COLUMNS.split(',').map((c) => `@${c.trim()}`).join(', ')})`);
    this.getStatement = db.prepare<[string], DbTask>('SELECT * FROM tasks WHERE id = ?');
    this.getByResponseStatement = db.prepare<[string], DbTask>('SELECT * FROM tasks WHERE response_id = ?');
    this.getByCompletionStatement = db.prepare<[string], DbTask>('SELECT * FROM tasks WHERE completion_id = ?');
    this.updateStatement = db.prepare(`
      UPDATE tasks SET status = @status, attempt = @attempt, restarts = @restarts, started_at = @started_at,
        finished_at = @finished_at, last_sequence_number = @last_sequence_number, output_start_seq = @output_start_seq,
        input_tokens = @input_tokens, output_tokens = @output_tokens, finish_reason = @finish_reason,
        error_code = @error_code, error_message = @error_message
      WHERE id = @id AND status = @expected_status`);
    // The same update for many tasks at once, each row of the JSON array being one task's
    // values in UPDATE_MANY_FIELDS order (recovery: `TaskLifecycle.deferring`).
    this.updateManyStatement = db.prepare<[string]>(`
      UPDATE tasks AS t SET ${UPDATE_MANY_FIELDS.slice(0, -2).map((column, index) => `${column} = j.value ->> ${index}`).join(', ')}
      FROM json_each(?) AS j
      WHERE t.seq = j.value ->> ${UPDATE_MANY_FIELDS.length - 2} AND t.status = j.value ->> ${UPDATE_MANY_FIELDS.length - 1}`);
    const listWhere = `(@client_id IS NULL OR client_id = @client_id)
        AND (@statuses IS NULL OR status IN (SELECT value FROM json_each(@statuses)))
        AND (@kinds IS NULL OR kind IN (SELECT value FROM json_each(@kinds)))`;
    this.listAscStatement = db.prepare<object, DbTask>(
      `SELECT * FROM tasks WHERE ${listWhere} AND seq > @after ORDER BY seq ASC LIMIT @limit`);
    this.listDescStatement = db.prepare<object, DbTask>(
      `SELECT * FROM tasks WHERE ${listWhere} AND seq < @after ORDER BY seq DESC LIMIT @limit`);
    this.nextRunnableStatement = db.prepare<[string], DbTask>(`
      SELECT * FROM tasks WHERE status IN ('running', 'loading', 'cancelling') AND ${oneOf('status', UNFINISHED_STATUSES)} AND NOT ${pullTask}
        AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT 1`);
    // The tasks recovery changes (the rule is the domain's RECOVERY table), each with its
    // response's header, which its events carry (null for tasks of other kinds). A window of
    // positions at a time, in creation order whatever the status: one transaction then writes the
    // events of neighbouring tasks (neighbouring pages), and the merge of the ranges of
    // tasks_unfinished stays small.
    // Rows come as arrays (`raw`): for the many thousands of rows recovery reads, building two
    // objects from an array in JavaScript takes half the time of better-sqlite3's `expand`.
    this.toRecoverStatement = db.prepare<[number, number], unknown[]>(`
      SELECT t.*, ${RESPONSE_HEADER_COLUMNS.map((column) => `r.${column}`).join(', ')}
      FROM tasks t LEFT JOIN responses r ON r.id = t.response_id
      WHERE ${changedAtRecoverySql('t.')} AND t.seq > ? AND t.seq <= ?
      ORDER BY t.seq`).raw();
    this.toRecoverColumns = this.toRecoverStatement.columns().map((column) => ({
      table: column.table === 'tasks' ? 'tasks' : 'responses',
      name: column.name,
    }));
    this.maxSeqStatement = db.prepare<[], number | null>('SELECT max(seq) FROM tasks').pluck();
    // From the partial indexes of `store = 0` rows, which hold only what is unfinished (or left by
    // a crash); CROSS JOIN keeps them the outer loop, where the planner would scan every
    // unfinished task instead (100,000 queued tasks: 100 ms against 0.1 ms).
    this.unfinishedUnstoredStatement = db.prepare<[], string>(`
      SELECT id FROM (
        SELECT t.id, t.seq FROM responses r CROSS JOIN tasks t ON t.response_id = r.id
        WHERE r.store = 0 AND ${oneOf('t.status', UNFINISHED_STATUSES)}
        UNION ALL
        SELECT t.id, t.seq FROM chat_completions c CROSS JOIN tasks t ON t.completion_id = c.id
        WHERE c.store = 0 AND ${oneOf('t.status', UNFINISHED_STATUSES)})
      ORDER BY seq`).pluck();
    this.countUnchangedAtRecoveryStatement = db.prepare<[], number>(
      `SELECT count(*) FROM tasks WHERE ${unchangedAtRecoverySql()}`).pluck();
    this.unfinishedForModelStatement = db.prepare<[string], { n: number }>(`
      SELECT count(*) AS n FROM tasks WHERE model = ? AND ${oneOf('status', UNFINISHED_STATUSES)}`);
    this.deleteStatement = db.prepare('DELETE FROM tasks WHERE id = ?');
    this.countByStatusStatement = db.prepare<[], { status: TaskStatus; n: number }>('SELECT status, count(*) AS n FROM tasks GROUP BY status');
    const unfinished = oneOf('status', UNFINISHED_STATUSES);
    // Kept by the triggers of migration 0010: one row, however many tasks the client has queued.
    this.unfinishedForClientStatement = db.prepare<[string], number>(
      'SELECT coalesce((SELECT count FROM unfinished_tasks_per_client WHERE client_id = ?), 0)').pluck();
    this.oldestQueuedOfClientStatement = db.prepare<[string, string], DbTask>(`
      SELECT * FROM tasks WHERE client_id = ? AND status = 'queued' AND ${unfinished} AND NOT ${pullTask}
        AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT 1`);
    this.clientsWithQueuedStatement = db.prepare<[], { client_id: string; first: number }>(`
      SELECT client_id, min(seq) AS first FROM tasks WHERE status = 'queued' AND ${unfinished} AND NOT ${pullTask} GROUP BY client_id ORDER BY first`);
  }

  insert(task: Task): number {
    return Number(this.insertStatement.run(toParams(task)).lastInsertRowid);
  }

  get(id: string): Task | null {
    const row = this.getStatement.get(id);
    return row ? toTask(row) : null;
  }

  getByResponse(responseId: string): Task | null {
    const row = this.getByResponseStatement.get(responseId);
    return row ? toTask(row) : null;
  }

  getByCompletion(completionId: string): Task | null {
    const row = this.getByCompletionStatement.get(completionId);
    return row ? toTask(row) : null;
  }

  /** Writes `task` only if the stored status is still `expectedStatus`; false when it was not. */
  update(task: Task, expectedStatus: TaskStatus): boolean {
    return this.updateStatement.run({ ...toParams(task), expected_status: expectedStatus }).changes === 1;
  }

  /**
   * `update` for many tasks in one statement; returns how many were written (a task whose stored
   * status was not the expected one is not).
   */
  updateMany(changes: ReadonlyArray<{ task: Task; expectedStatus: TaskStatus }>): number {
    if (changes.length === 0) return 0;
    const rows = changes.map(({ task, expectedStatus }) => [
      task.status, task.attempt, task.restarts, task.startedAt, task.finishedAt, task.lastSequenceNumber, task.outputStartSeq,
      task.inputTokens, task.outputTokens, task.finishReason, task.error?.code ?? null, task.error?.message ?? null,
      task.seq, expectedStatus,
    ]);
    return this.updateManyStatement.run(JSON.stringify(rows)).changes;
  }

  list(query: TaskListQuery): { tasks: Task[]; hasMore: boolean } {
    const statement = query.order === 'asc' ? this.listAscStatement : this.listDescStatement;
    const after = query.afterSeq ?? (query.order === 'asc' ? 0 : Number.MAX_SAFE_INTEGER);
    const rows = statement.all({
      client_id: query.clientId,
      statuses: query.statuses ? JSON.stringify(query.statuses) : null,
      kinds: query.kinds ? JSON.stringify(query.kinds) : null,
      after,
      limit: query.limit + 1,
    });
    return { tasks: rows.slice(0, query.limit).map(toTask), hasMore: rows.length > query.limit };
  }

  /**
   * The tasks that recovery changes (LMSP 11.3, 7.5) with a position in (afterSeq, throughSeq],
   * in creation order, each with its response's header (null for a task of another kind).
   */
  toRecover(afterSeq: number, throughSeq: number): Array<{ task: Task; header: ResponseHeader | null }> {
    const columns = this.toRecoverColumns;
    return this.toRecoverStatement.all(afterSeq, throughSeq).map((values) => {
      const task: Record<string, unknown> = {};
      const response: Record<string, unknown> = {};
      columns.forEach((column, index) => ((column.table === 'tasks' ? task : response)[column.name] = values[index]));
      return {
        task: toTask(task as unknown as DbTask),
        header: response.id === null ? null : toResponseHeader(response as unknown as DbResponseHeader),
      };
    });
  }

  /** The newest task's position; 0 when there is none. */
  maxSeq(): number {
    return this.maxSeqStatement.get() ?? 0;
  }

  /**
   * Unfinished tasks of `store: false` responses and chat completions, in creation order: only a
   * plain or streaming create makes them, and its request deletes them once they finish (LMSP 6,
   * 13). At startup that request has died with the process.
   */
  unfinishedUnstored(): string[] {
    return this.unfinishedUnstoredStatement.all();
  }

  /** Unfinished tasks that recovery leaves as they are: queued under retry or resume. */
  countUnchangedAtRecovery(): number {
    return this.countUnchangedAtRecoveryStatement.get()!;
  }

  countUnfinishedForModel(model: string): number {
    return this.unfinishedForModelStatement.get(model)!.n;
  }

  /** LMSP 16: how many unfinished tasks a client has. */
  countUnfinishedForClient(clientId: string): number {
    return this.unfinishedForClientStatement.get(clientId)!;
  }

  /** A client's oldest queued task not `claimed` already (FIFO within a client, LMSP 16). */
  oldestQueuedOf(clientId: string, claimed: Iterable<string>): Task | null {
    const row = this.oldestQueuedOfClientStatement.get(clientId, JSON.stringify([...claimed]));
    return row ? toTask(row) : null;
  }

  /** The clients that have queued tasks, the one whose oldest queued task is oldest first. */
  clientsWithQueuedTasks(): string[] {
    return this.clientsWithQueuedStatement.all().map((row) => row.client_id);
  }

  /**
   * A task past `queued` that no slot holds: one resumed at startup (still running), or one whose
   * worker let it go when the database could not record its next step (a full disk), left
   * loading, running or cancelling.
   */
  nextResumed(claimed: Iterable<string>): Task | null {
    const row = this.nextRunnableStatement.get(JSON.stringify([...claimed]));
    return row ? toTask(row) : null;
  }

  countByStatus(): Record<string, number> {
    return Object.fromEntries(this.countByStatusStatement.all().map((row) => [row.status, row.n]));
  }

  delete(id: string): void {
    this.deleteStatement.run(id);
  }
}
