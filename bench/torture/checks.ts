/**
 * The checks of the invariants: offline, on the database opened read-only while the service is
 * down, and online, through the API after a restart and at the end (black box).
 */
import BetterSqlite3 from 'better-sqlite3';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ChatCompletionObject } from '../../src/api/chat-completions.js';
import type { ResponseObject, TaskEvent, TaskObject } from '../../src/api/types.js';
import { api, type TestService } from '../../test/helpers/service.js';
import type { Ledger } from './ledger.js';
import { sleep } from './processes.js';
import type { Info, Invariant, Violations } from './report.js';
import { chatTextOf, textOf, type References } from './shapes.js';

const TERMINAL_EVENTS = new Set([
  'response.completed', 'response.incomplete', 'response.failed', 'response.cancelled',
  'chat.completion.completed', 'chat.completion.failed', 'chat.completion.cancelled',
  'model.pull.completed', 'model.pull.failed', 'model.pull.cancelled',
]);
export const FINAL_STATUSES = new Set(['completed', 'failed', 'cancelled']);
const UNFINISHED_QUERY = 'status=queued,loading,running,cancelling';

interface TaskRow {
  id: string;
  kind: string;
  response_id: string | null;
  completion_id: string | null;
  status: string;
  on_restart: string;
  last_sequence_number: number;
}

interface EventRow {
  sequence_number: number;
  type: string;
  data: string;
}

/** A finished task as last verified: it must never change again. */
export interface Sealed {
  status: string;
  last: number;
}

export interface CheckInputs {
  ledger: Ledger;
  violations: Violations;
  references: References;
  sealed: Map<string, Sealed>;
  /** The digest of the file every pull fetches. */
  pullDigest: string;
}

/** An event as the checks read it, from the database or the API. */
interface CheckedEvent {
  sequence_number: number;
  type: string;
  /** The text a delta (or a chat chunk's `delta.content`) adds. */
  delta?: unknown;
  /** The attempt a `response.queued` starts. */
  attempt?: number;
  /** A `chat.completion.queued` whose completion holds no content: what came before is dropped. */
  startsOver?: boolean;
}

/** The id the ledger knows a task by: its response's, or its own for a chat completion or a pull. */
function ledgerIdOf(task: { id: string; kind: string; response_id: string | null }): string {
  return task.kind === 'response' ? task.response_id ?? task.id : task.id;
}

/**
 * A finished pull (LMSP 5.1), in the database: completed means its model is registered with the
 * file's digest and the file is in place; otherwise no model and no partial file. A pull that named
 * a wrong digest never completes. Pulls not made by the workers are left alone.
 */
function checkFinishedPull(inputs: CheckInputs, task: { id: string; status: string }, model: { digest: string; path: string } | undefined,
  modelsDir: string, where: string): void {
  const pull = inputs.ledger.acknowledged.get(task.id)?.pull;
  if (!pull) return;
  const partial = existsSync(join(modelsDir, `${pull.modelId}.gguf.partial`));
  let problem: string | null = null;
  if (task.status === 'completed') {
    if (pull.wrongDigest) problem = 'completed although it named a wrong digest';
    else if (!model) problem = 'completed without its model';
    else if (model.digest !== inputs.pullDigest) problem = `completed with digest ${model.digest}`;
    else if (!existsSync(model.path)) problem = 'completed without its file';
  } else if (model) {
    problem = `${task.status}, yet its model is registered`;
  }
  if (!problem && partial) problem = `${task.status}, yet its partial file is left`;
  if (problem) inputs.violations.add('pull_errors', task.id, `${where}: ${pull.modelId} ${problem}`);
}

/**
 * The text of a task's current attempt, from its events: the deltas (or chat chunks' content)
 * concatenated, starting over at a `response.queued` that began a new attempt (a `retry` restart
 * drops earlier output), or at a `chat.completion.queued` with no content: the chat completion
 * object carries no attempt, and a retry empties it, while a resume keeps what it has (a resume
 * of a task with no content yet drops nothing but empty chunks either way).
 */
export function attemptText(events: ReadonlyArray<CheckedEvent>): string {
  let text = '';
  let attempt = 1;
  for (const event of events) {
    if (event.type === 'response.queued' && (event.attempt ?? attempt) > attempt) {
      attempt = event.attempt!;
      text = '';
    } else if (event.type === 'chat.completion.queued' && event.startsOver) {
      text = '';
    } else if (event.type === 'response.output_text.delta' || event.type === 'chat.completion.chunk') {
      text += String(event.delta ?? '');
    }
  }
  return text;
}

/** What the checks read of a chat event's payload (`chunk` or `completion`). */
function chatEventFields(type: string, payload: { chunk?: { choices?: Array<{ delta?: { content?: string | null } }> }; completion?: ChatCompletionObject }): Partial<CheckedEvent> {
  if (type === 'chat.completion.chunk') return { delta: payload.chunk?.choices?.[0]?.delta?.content ?? '' };
  if (type === 'chat.completion.queued') return { startsOver: (payload.completion ? chatTextOf(payload.completion) : '') === '' };
  return {};
}

/**
 * The checks of one task's whole log (LMSP 7.3): numbers 1..N with N = last_sequence_number,
 * exactly one terminal event for a finished task and nothing after it; for a finished task the
 * deltas concatenate to its final text, a completed one with a fixed seed has the reference text,
 * and one cancelled with a 2xx is cancelled.
 */
function checkTaskLog(inputs: CheckInputs, task: { id: string; ledgerId: string; status: string; policy: string; last: number },
  events: ReadonlyArray<CheckedEvent>, finalText: string | null, where: string): void {
  const { violations, ledger, references } = inputs;
  const numbersOk = events.length === task.last && events.every((event, index) => event.sequence_number === index + 1);
  if (!numbersOk) {
    const numbers = events.map((event) => event.sequence_number);
    violations.add('event_log_errors', task.id, `${where}: ${events.length} events, last_sequence_number ${task.last}, numbers ${numbers.slice(0, 8).join(',')}${numbers.length > 8 ? ',...' : ''}`);
  }
  const terminals = events.filter((event) => TERMINAL_EVENTS.has(event.type));
  const final = FINAL_STATUSES.has(task.status);
  const lastEvent = events.at(-1);
  if (terminals.length > 1 || (terminals.length === 1 && lastEvent && !TERMINAL_EVENTS.has(lastEvent.type)) || (final !== (terminals.length === 1))) {
    violations.add('terminal_event_errors', task.id, `${where}: status ${task.status}, terminal events ${terminals.map((event) => `${event.type}@${event.sequence_number}`).join(' ') || 'none'}, last event ${lastEvent?.type}@${lastEvent?.sequence_number}`);
  }
  const cancelStatus = ledger.cancelled.get(task.ledgerId);
  if (cancelStatus !== undefined && task.status !== 'cancelled' && task.status !== 'cancelling') {
    violations.add('cancelled_not_cancelled', task.id, `${where}: cancel answered ${cancelStatus}, task is ${task.status}`);
  }
  if (!final) return;
  const text = attemptText(events);
  if (finalText !== null && text !== finalText) {
    violations.add('delta_text_mismatch', task.id, `${where}: deltas give ${text.length} characters, final text has ${finalText.length}`);
  }
  const record = ledger.acknowledged.get(task.ledgerId);
  if (task.status === 'completed' && record?.seeded && finalText !== null) {
    const expected = (record.kind === 'chat' ? references.chat : references.responses)[record.shape]!;
    if (finalText !== expected) {
      const invariant: Invariant = task.policy === 'resume' ? 'resume_text_mismatch' : 'other_text_mismatch';
      violations.add(invariant, task.id, `${where}: ${record.kind} shape ${record.shape} (${record.mode}, ${task.policy}) ended with ${JSON.stringify(finalText.slice(0, 60))}..., an uninterrupted run gives ${JSON.stringify(expected.slice(0, 60))}...`);
    }
  }
}

/** Event rows from the database as the checks want them (attempt of `response.queued`, delta text). */
function parseEventRows(rows: EventRow[]): CheckedEvent[] {
  return rows.map((row) => {
    if (row.type === 'response.output_text.delta') return { sequence_number: row.sequence_number, type: row.type, delta: (JSON.parse(row.data) as { delta?: unknown }).delta };
    if (row.type === 'response.queued') {
      return { sequence_number: row.sequence_number, type: row.type, attempt: (JSON.parse(row.data) as { response?: ResponseObject }).response?.task.attempt };
    }
    if (row.type === 'chat.completion.chunk' || row.type === 'chat.completion.queued') {
      return { sequence_number: row.sequence_number, type: row.type, ...chatEventFields(row.type, JSON.parse(row.data) as never) };
    }
    return { sequence_number: row.sequence_number, type: row.type };
  });
}

/**
 * The checks made while the service is down, on the database opened read-only: integrity, every
 * acknowledged response present, and the logs of every task not yet sealed (plus, when `full`,
 * an aggregate re-check of every task's log). Sealed tasks must be exactly as they were sealed.
 */
export function offlineCheck(dataDir: string, inputs: CheckInputs, options: { full: boolean; where: string }): { tasks: number; unfinished: Record<string, number> } {
  const { violations, ledger, sealed } = inputs;
  const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true, fileMustExist: true });
  try {
    const integrity = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
    if (integrity.length !== 1 || integrity[0]!.integrity_check !== 'ok') {
      violations.add('integrity_check_failures', options.where, integrity.slice(0, 3).map((row) => row.integrity_check).join('; '));
    }
    const tasks = db.prepare('SELECT id, kind, response_id, completion_id, status, on_restart, last_sequence_number FROM tasks').all() as TaskRow[];
    const byLedgerId = new Map(tasks.map((task) => [ledgerIdOf(task), task]));
    const responseIds = new Set((db.prepare('SELECT id FROM responses').all() as Array<{ id: string }>).map((row) => row.id));
    const completionIds = new Set((db.prepare('SELECT id FROM chat_completions').all() as Array<{ id: string }>).map((row) => row.id));
    for (const [id, record] of ledger.acknowledged) {
      // A `store: false` chat completion is deleted, task and all, once it has finished.
      if (!record.store) continue;
      const task = byLedgerId.get(id);
      const subject = record.kind === 'chat' ? task?.completion_id != null && completionIds.has(task.completion_id)
        : record.kind === 'pull' ? task !== undefined : responseIds.has(id);
      if (!task || !subject) {
        violations.add('missing_acknowledged', id, `${options.where}: not in the database (task ${task ? 'present' : 'absent'}, ${record.kind} ${subject ? 'present' : 'absent'})`);
      }
    }
    const pulledModel = db.prepare<[string], { digest: string; path: string }>('SELECT m.digest, m.path FROM models m JOIN model_pulls p ON p.model_id = m.id WHERE p.task_id = ?');
    const modelsDir = join(dataDir, 'models');
    const eventsOf = db.prepare<[string], EventRow>('SELECT sequence_number, type, data FROM task_events WHERE task_id = ? ORDER BY sequence_number');
    const outputText = db.prepare<[string], { output_text: string | null }>('SELECT output_text FROM responses WHERE id = ?');
    const chatOutputText = db.prepare<[string], { output_text: string | null }>('SELECT output_text FROM chat_completions WHERE id = ?');
    for (const task of tasks) {
      const seal = sealed.get(task.id);
      if (seal) {
        if (seal.status !== task.status || seal.last !== task.last_sequence_number) {
          violations.add('terminal_event_errors', task.id, `${options.where}: finished as ${seal.status} with ${seal.last} events, now ${task.status} with ${task.last_sequence_number}`);
        }
        continue;
      }
      const events = parseEventRows(eventsOf.all(task.id));
      const final = FINAL_STATUSES.has(task.status);
      const finalText = !final || task.kind === 'model_pull' ? null
        : task.kind === 'chat_completion' ? chatOutputText.get(task.completion_id ?? '')?.output_text ?? ''
          : outputText.get(task.response_id ?? '')?.output_text ?? '';
      checkTaskLog(inputs, { id: task.id, ledgerId: ledgerIdOf(task), status: task.status, policy: task.on_restart, last: task.last_sequence_number }, events, finalText, options.where);
      if (final && task.kind === 'model_pull') checkFinishedPull(inputs, task, pulledModel.get(task.id), modelsDir, options.where);
      if (final) sealed.set(task.id, { status: task.status, last: task.last_sequence_number });
    }
    if (options.full) aggregateLogCheck(db, tasks, violations, options.where);
    // Once a task is sealed it is only ever compared; the cancel ledger must also hold for them.
    for (const [id, status] of ledger.cancelled) {
      const task = byLedgerId.get(id);
      if (task && task.status !== 'cancelled' && task.status !== 'cancelling') {
        violations.add('cancelled_not_cancelled', task.id, `${options.where}: cancel answered ${status}, task is ${task.status}`);
      }
    }
    const unfinished: Record<string, number> = {};
    for (const task of tasks.filter((each) => !FINAL_STATUSES.has(each.status))) unfinished[task.status] = (unfinished[task.status] ?? 0) + 1;
    return { tasks: tasks.length, unfinished };
  } finally {
    db.close();
  }
}

/** How often the recovery of LMSP 11.3 left its mark, and how tasks ended (for the summary). */
export function recoveryCoverage(dataDir: string, info: Info): void {
  const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true, fileMustExist: true });
  try {
    const events = db.prepare(`SELECT type, count(*) AS n FROM task_events
      WHERE type IN ('response.queued', 'response.resumed', 'response.cancelling', 'response.cancelled', 'response.failed',
                     'chat.completion.queued', 'chat.completion.resumed', 'chat.completion.cancelling', 'chat.completion.cancelled', 'chat.completion.failed',
                     'model.pull.queued', 'model.pull.resumed', 'model.pull.cancelling', 'model.pull.cancelled', 'model.pull.failed')
      GROUP BY type`).all() as Array<{ type: string; n: number }>;
    for (const { type, n } of events) info.bump(`events.${type}`, n);
    const endings = db.prepare(`SELECT kind || '.' || status || '.' || on_restart || coalesce('.' || error_code, '') AS ending, count(*) AS n FROM tasks GROUP BY ending`).all() as Array<{ ending: string; n: number }>;
    for (const { ending, n } of endings) info.bump(`ended.${ending}`, n);
  } finally {
    db.close();
  }
}

/** Every task's log in one pass, by numbers only: count = max = last_sequence_number, min = 1. */
function aggregateLogCheck(db: BetterSqlite3.Database, tasks: TaskRow[], violations: Violations, where: string): void {
  const terminalList = [...TERMINAL_EVENTS].map((type) => `'${type}'`).join(',');
  const rows = db.prepare(`
    SELECT task_id, count(*) AS n, min(sequence_number) AS lo, max(sequence_number) AS hi,
           sum(type IN (${terminalList})) AS terminals,
           max(CASE WHEN type IN (${terminalList}) THEN sequence_number END) AS last_terminal
    FROM task_events GROUP BY task_id`).all() as Array<{ task_id: string; n: number; lo: number; hi: number; terminals: number; last_terminal: number | null }>;
  const byTask = new Map(rows.map((row) => [row.task_id, row]));
  for (const task of tasks) {
    const row = byTask.get(task.id);
    byTask.delete(task.id);
    const n = row?.n ?? 0;
    if (n !== task.last_sequence_number || (n > 0 && (row!.lo !== 1 || row!.hi !== n))) {
      violations.add('event_log_errors', task.id, `${where} (full scan): ${n} events from ${row?.lo} to ${row?.hi}, last_sequence_number ${task.last_sequence_number}`);
    }
    const final = FINAL_STATUSES.has(task.status);
    const terminals = row?.terminals ?? 0;
    if (terminals > 1 || (terminals === 1 && row!.last_terminal !== row!.hi) || final !== (terminals === 1)) {
      violations.add('terminal_event_errors', task.id, `${where} (full scan): status ${task.status}, ${terminals} terminal events, last at ${row?.last_terminal}, log ends at ${row?.hi}`);
    }
  }
  // Events of a task that does not exist: a log without its task, unless the sweep deleted the
  // task first and is deleting its log (LMSP 10: a log longer than a batch).
  const sweeping = new Set(db.prepare('SELECT task_id FROM swept_task_logs').pluck().all() as string[]);
  for (const orphan of byTask.keys()) {
    if (!sweeping.has(orphan)) violations.add('event_log_errors', orphan, `${where} (full scan): events without a task`);
  }
}

/**
 * After a restart: every response acknowledged since the last check answers GET (not 404), and
 * so does the task of every stored chat completion.
 */
export async function onlineCheckFresh(service: TestService, ledger: Ledger, violations: Violations, where: string): Promise<void> {
  const ids = ledger.fresh.filter((id) => ledger.acknowledged.get(id)?.store !== false);
  ledger.fresh = [];
  await inBatches(ids, 8, async (id) => {
    const path = (ledger.acknowledged.get(id)?.kind ?? 'response') === 'response' ? `/v1/responses/${id}` : `/v1/tasks/${id}`;
    const answer = await api(service, path, { signal: AbortSignal.timeout(10_000) });
    const text = await answer.text();
    if (answer.status === 404) violations.add('missing_acknowledged', id, `${where}: GET answered 404`);
    else if (answer.status >= 500) violations.add('server_errors', `GET ${id} ${where}`, `${answer.status} ${text.slice(0, 200)}`);
    else if (answer.status !== 200) throw new Error(`GET ${path} answered ${answer.status}: ${text}`);
  });
}

export async function inBatches<T>(items: readonly T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
  for (let start = 0; start < items.length; start += width) await Promise.all(items.slice(start, start + width).map(work));
}

/** Idempotency: every key's 2xx answers must all name one response. */
export function checkKeys(ledger: Ledger, violations: Violations, info: Info): void {
  for (const record of ledger.keys.values()) {
    if (record.ids.size <= 1) continue;
    if (record.mode === 'stream' || record.kind === 'chat') {
      // A plain streaming create whose client left (or whose service died) releases its key: the
      // documented behaviour (docs/api.md), so a retry runs again. So does a plain chat
      // completion, whose client's leaving cancels it. Counted, not a violation here.
      info.bump(record.kind === 'chat' ? 'chat_keys_run_again' : 'stream_keys_run_again');
      continue;
    }
    violations.add('idempotency_double_tasks', record.key, `${record.mode} create answered with ${[...record.ids].join(', ')}`);
  }
}

/** Every task of the service, through the API (admin sees all), oldest first. */
export async function allTasks(service: TestService): Promise<TaskObject[]> {
  const tasks: TaskObject[] = [];
  let after: string | null = null;
  for (let page = 0; page < 10_000; page++) {
    const query: string = `/v1/tasks?order=asc&limit=1000${after ? `&after=${after}` : ''}`;
    const answer = await api(service, query, { signal: AbortSignal.timeout(30_000) });
    if (answer.status !== 200) throw new Error(`GET /v1/tasks answered ${answer.status}`);
    const body = (await answer.json()) as { data: TaskObject[]; has_more: boolean; last_id: string | null };
    tasks.push(...body.data);
    if (!body.has_more || !body.last_id) break;
    after = body.last_id;
  }
  return tasks;
}

/** A task's whole log, page by page, through GET /v1/tasks/{id}/events. */
export async function eventsViaApi(service: TestService, taskId: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  let after = 0;
  for (let page = 0; page < 1000; page++) {
    const answer = await api(service, `/v1/tasks/${taskId}/events?starting_after=${after}&limit=1000`, { signal: AbortSignal.timeout(30_000) });
    if (answer.status !== 200) throw new Error(`GET events of ${taskId} answered ${answer.status}`);
    const body = (await answer.json()) as { data: TaskEvent[]; has_more: boolean };
    events.push(...body.data);
    if (!body.has_more || body.data.length === 0) break;
    after = body.data.at(-1)!.sequence_number;
  }
  return events;
}

/**
 * The end: every task through the API, black box: its log by pages, its final text from GET
 * /v1/responses/{id}, the ledger's acknowledgements, cancels and keys.
 */
export async function finalApiCheck(service: TestService, inputs: CheckInputs): Promise<number> {
  const { violations, ledger } = inputs;
  const tasks = await allTasks(service);
  const byLedgerId = new Map(tasks.map((task) => [ledgerIdOf(task), task]));
  const missing = [...ledger.acknowledged.values()].filter((record) => record.store && !byLedgerId.has(record.id));
  await inBatches(missing, 8, async (record) => {
    const answer = await api(service, record.kind === 'response' ? `/v1/responses/${record.id}` : `/v1/tasks/${record.id}`, { signal: AbortSignal.timeout(10_000) });
    await answer.body?.cancel().catch(() => undefined);
    violations.add('missing_acknowledged', record.id, `end: not listed, GET answered ${answer.status}`);
  });
  await inBatches(tasks, 8, async (task) => {
    const events: CheckedEvent[] = (await eventsViaApi(service, task.id)).map((event) => ({
      sequence_number: event.sequence_number,
      type: event.type,
      delta: event.delta,
      attempt: event.type === 'response.queued' ? (event.response as ResponseObject | undefined)?.task.attempt : undefined,
      ...(event.type.startsWith('chat.completion.') ? chatEventFields(event.type, event as never) : {}),
    }));
    let finalText: string | null = null;
    if (FINAL_STATUSES.has(task.status)) {
      if (task.kind === 'model_pull') {
        await checkPullViaApi(service, inputs, task);
      } else if (task.kind === 'chat_completion') {
        const answer = await api(service, `/v1/chat/completions/${task.completion_id}`, { signal: AbortSignal.timeout(10_000) });
        finalText = answer.status === 200 ? chatTextOf((await answer.json()) as ChatCompletionObject) : null;
      } else {
        const answer = await api(service, `/v1/responses/${task.response_id}`, { signal: AbortSignal.timeout(10_000) });
        finalText = answer.status === 200 ? textOf((await answer.json()) as ResponseObject) : null;
      }
    } else {
      violations.add('unfinished_at_end', task.id, `still ${task.status} at the end`);
    }
    checkTaskLog(inputs, { id: task.id, ledgerId: ledgerIdOf(task), status: task.status, policy: task.on_restart, last: task.last_sequence_number }, events, finalText, 'end (API)');
  });
  return tasks.length;
}

/** A finished pull through the API: its model is listed with the file's digest exactly when it completed. */
async function checkPullViaApi(service: TestService, inputs: CheckInputs, task: TaskObject): Promise<void> {
  const pull = inputs.ledger.acknowledged.get(task.id)?.pull;
  if (!pull) return;
  const answer = await api(service, `/v1/models/${pull.modelId}`, { signal: AbortSignal.timeout(10_000) });
  const model = answer.status === 200 ? (await answer.json()) as { digest: string; status: string } : null;
  if (answer.status !== 200) await answer.body?.cancel().catch(() => undefined);
  const ok = task.status === 'completed' ? model?.digest === inputs.pullDigest && model.status === 'ready' && !pull.wrongDigest : answer.status === 404;
  if (!ok) inputs.violations.add('pull_errors', task.id, `end (API): ${task.status}, GET /v1/models/${pull.modelId} answered ${answer.status}${model ? ` (${model.status}, ${model.digest})` : ''}`);
}

/** Partial files left in the models directory once every task has finished (none may be). */
export function leftoverPartials(dataDir: string, violations: Violations): void {
  const modelsDir = join(dataDir, 'models');
  for (const name of existsSync(modelsDir) ? readdirSync(modelsDir) : []) {
    if (name.endsWith('.partial')) violations.add('pull_errors', name, `end: ${name} left in the models directory`);
  }
}

/** How many tasks are unfinished now (bounded by one page: enough to decide on a backlog). */
export async function unfinishedCount(service: TestService): Promise<number> {
  const answer = await api(service, `/v1/tasks?${UNFINISHED_QUERY}&limit=1000`, { signal: AbortSignal.timeout(10_000) });
  if (answer.status !== 200) throw new Error(`GET /v1/tasks answered ${answer.status}`);
  return ((await answer.json()) as { data: TaskObject[] }).data.length;
}

/** Waits (bounded) until no task is unfinished; false when some still were at the deadline. */
export async function drain(service: TestService, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await unfinishedCount(service)) === 0) return true;
    await sleep(250);
  }
  return false;
}
