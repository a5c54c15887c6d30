/**
 * The vocabulary of tasks: their kinds, states, the transitions between states, restart
 * policies and what recovery does with each (LMSP 7, 11.3). Everything here is data and pure
 * functions; every other layer derives its rules from it, the SQL of the store included.
 *
 * Glossary
 * - task: the durable unit of work behind a response (`task_...`), with a status (LMSP 7.2) and
 *   a restart policy (`on_restart`, LMSP 7.5).
 * - attempt: one run of a task from the start; a `retry` after a restart begins attempt + 1 and
 *   drops the earlier output, a `resume` continues the same attempt.
 * - event: one entry of a task's log (`response.created`, deltas, ...), numbered per task from 1
 *   without gaps (`sequence_number`); a stream is a replay of the log followed live.
 * - snapshot: what a `resume` continues from: the token ids stored with each delta event, in the
 *   same transaction as the text they produced.
 * - client: a paired app, agent or script (`cli_...`), known by the SHA-256 of its token.
 * - scope: what a client may do: `responses`, `models:read`, `models:write`, `admin`.
 */
import type { TaskErrorCode } from './errors.js';

export const TASK_KINDS = ['response', 'chat_completion', 'model_pull'] as const;
export type TaskKind = (typeof TASK_KINDS)[number];

/** Kinds whose tasks download rather than generate: their own workers run them, beside the generation slots (LMSP 5.1). */
export const PULL_KINDS = ['model_pull'] as const satisfies readonly TaskKind[];

export const TASK_STATUSES = ['queued', 'loading', 'running', 'cancelling', 'completed', 'failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

export const UNFINISHED_STATUSES = ['queued', 'loading', 'running', 'cancelling'] as const satisfies readonly TaskStatus[];
export type UnfinishedStatus = (typeof UNFINISHED_STATUSES)[number];
export const FINAL_STATUSES = ['completed', 'failed', 'cancelled'] as const satisfies readonly TaskStatus[];
export type FinalStatus = (typeof FINAL_STATUSES)[number];

/** Statuses in which a worker may still record output (it may be finishing a token when a cancel lands). */
export const OUTPUT_STATUSES = ['running', 'cancelling'] as const satisfies readonly TaskStatus[];

export const RESTART_POLICIES = ['fail', 'retry', 'resume'] as const;
export type RestartPolicy = (typeof RESTART_POLICIES)[number];

/** LMSP 7.2: the only status changes allowed while the service runs (besides the recovery table, for a task whose runner died). */
export const TRANSITIONS: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = Object.freeze({
  queued: ['loading', 'running', 'cancelled'],
  loading: ['running', 'failed', 'cancelling'],
  running: ['completed', 'failed', 'cancelling'],
  cancelling: ['cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
});

/** What recovery does to one unfinished task (LMSP 11.3, 7.5). */
export type RecoveryOutcome = 'unchanged' | 'failed' | 'cancelled' | 'requeued' | 'resumed';

/**
 * LMSP 11.3 and 7.5: the outcome for each unfinished state at startup, by restart policy. A
 * task still queued under retry or resume stays as it is and gets no event (`unchanged`); a
 * running task under resume goes on running from its snapshot (`resumed`).
 */
export const RECOVERY: Readonly<Record<RestartPolicy, Readonly<Record<UnfinishedStatus, RecoveryOutcome>>>> = Object.freeze({
  fail: { queued: 'failed', loading: 'failed', running: 'failed', cancelling: 'cancelled' },
  retry: { queued: 'unchanged', loading: 'requeued', running: 'requeued', cancelling: 'cancelled' },
  resume: { queued: 'unchanged', loading: 'requeued', running: 'resumed', cancelling: 'cancelled' },
});

/** The status a recovery outcome leaves a task in. */
export function statusAfterRecovery(from: UnfinishedStatus, outcome: RecoveryOutcome): TaskStatus {
  switch (outcome) {
    case 'unchanged':
      return from;
    case 'failed':
      return 'failed';
    case 'cancelled':
      return 'cancelled';
    case 'requeued':
      return 'queued';
    case 'resumed':
      return 'running';
  }
}

/** The response of a `response` task (LMSP 7.1); throws for another kind, which is a bug. */
export function responseIdOf(task: Pick<Task, 'id' | 'kind' | 'responseId'>): string {
  if (task.responseId === null) throw new Error(`task ${task.id} of kind ${task.kind} has no response`);
  return task.responseId;
}

/** A task that was working (loading or running) when the service stopped, or its runner died, counts a restart (LMSP 7.5 `max_restarts`). */
export function wasInterrupted(status: TaskStatus): boolean {
  return status === 'loading' || status === 'running';
}

/** The (status, policy) pairs whose tasks recovery changes, for the store's queries. */
export function changedAtRecovery(): Array<{ status: UnfinishedStatus; policies: RestartPolicy[] }> {
  return UNFINISHED_STATUSES.map((status) => ({
    status,
    policies: RESTART_POLICIES.filter((policy) => RECOVERY[policy][status] !== 'unchanged'),
  })).filter((entry) => entry.policies.length > 0);
}

export function isFinal(status: TaskStatus): status is FinalStatus {
  return (FINAL_STATUSES as readonly TaskStatus[]).includes(status);
}

export function isUnfinished(status: TaskStatus): status is UnfinishedStatus {
  return (UNFINISHED_STATUSES as readonly TaskStatus[]).includes(status);
}

export function acceptsOutput(status: TaskStatus): boolean {
  return (OUTPUT_STATUSES as readonly TaskStatus[]).includes(status);
}

export class TransitionError extends Error {
  override name = 'TransitionError';
}

/** Whether `from -> to` is allowed while the service runs (LMSP 7.2). */
export function canTransition(from: TaskStatus, to: TaskStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/**
 * Throws unless `from -> to` is allowed. At startup, and when a task's runner process dies, the
 * recovery table applies instead, where a state may also stay as it is (a resumed task stays
 * running), and a task interrupted more than `max_restarts` times fails (LMSP 7.5).
 */
export function assertTransition(from: TaskStatus, to: TaskStatus, phase: 'run' | 'recovery' = 'run'): void {
  if (phase === 'recovery') {
    if (isUnfinished(from) && RESTART_POLICIES.some((policy) => statusAfterRecovery(from, RECOVERY[policy][from]) === to)) return;
    if (wasInterrupted(from) && to === 'failed') return;
    throw new TransitionError(`recovery cannot move a task from ${from} to ${to}`);
  }
  if (!canTransition(from, to)) throw new TransitionError(`a task cannot go from ${from} to ${to}`);
}

/**
 * LMSP 7.4: once a cancel has been accepted, the task ends `cancelled`, never `completed` or
 * `failed`. The status a task really ends in when its worker reports `wanted`.
 */
export function settledStatus(current: TaskStatus, wanted: 'completed' | 'failed'): TaskStatus {
  return current === 'cancelling' ? 'cancelled' : wanted;
}

/** Why a generation stopped: its own end, or `max_output_tokens`. */
export type FinishReason = 'stop' | 'max_output_tokens';

/** LMSP 6: a task stopped by `max_output_tokens` is `incomplete`, not `completed`. */
export function isIncomplete(finishReason: FinishReason | null): boolean {
  return finishReason === 'max_output_tokens';
}

export interface TaskError {
  code: TaskErrorCode;
  message: string;
}

export interface Task {
  /** Creation order: FIFO scheduling and list cursors. */
  seq: number;
  id: string;
  kind: TaskKind;
  /** The response of a `response` task; null for other kinds. */
  responseId: string | null;
  /** The chat completion of a `chat_completion` task; null for other kinds. */
  completionId: string | null;
  clientId: string;
  model: string;
  status: TaskStatus;
  onRestart: RestartPolicy;
  attempt: number;
  /** Times its run was interrupted: found loading or running at startup, or its runner process died (LMSP 7.5 `max_restarts`). */
  restarts: number;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  lastSequenceNumber: number;
  /** Output of the current attempt lies in the events after this sequence number. */
  outputStartSeq: number;
  inputTokens: number | null;
  outputTokens: number;
  finishReason: FinishReason | null;
  error: TaskError | null;
}

/**
 * An event to append to a task's log: its type, its payload (built from the task as it is once
 * the change is applied, with this event's own sequence number) and, for output, the token ids
 * it covers (the resume snapshot).
 */
export interface EventDraft {
  type: string;
  payload: (task: Task) => object;
  tokens?: readonly number[];
}

/** An event as it was logged: its payload kept as the JSON text it was stored as. */
export interface LoggedEvent {
  sequenceNumber: number;
  type: string;
  createdAt: number;
  /** JSON object text of the payload, without `sequence_number`, `type` and `created_at`. */
  data: string;
}
