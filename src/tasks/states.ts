/**
 * The task state machine as data (LMSP 7.2), and the recovery table of LMSP 11.3. Every status
 * change in the store goes through `assertTransition`, the one place where the rules are checked.
 */

export const TASK_STATUSES = ['queued', 'loading', 'running', 'cancelling', 'completed', 'failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

export const UNFINISHED_STATUSES = ['queued', 'loading', 'running', 'cancelling'] as const satisfies readonly TaskStatus[];
export type UnfinishedStatus = (typeof UNFINISHED_STATUSES)[number];
export const FINAL_STATUSES = ['completed', 'failed', 'cancelled'] as const satisfies readonly TaskStatus[];

export const RESTART_POLICIES = ['fail', 'retry', 'resume'] as const;
export type RestartPolicy = (typeof RESTART_POLICIES)[number];

/** LMSP 7.2: the only status changes allowed while the service runs. */
export const TRANSITIONS: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = Object.freeze({
  queued: ['loading', 'running', 'cancelled'],
  loading: ['running', 'failed', 'cancelling'],
  running: ['completed', 'failed', 'cancelling'],
  cancelling: ['cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
});

/** LMSP 11.3: what each unfinished state becomes at startup, by restart policy. */
export const RECOVERY: Readonly<Record<RestartPolicy, Readonly<Record<UnfinishedStatus, TaskStatus>>>> = Object.freeze({
  fail: { queued: 'failed', loading: 'failed', running: 'failed', cancelling: 'cancelled' },
  retry: { queued: 'queued', loading: 'queued', running: 'queued', cancelling: 'cancelled' },
  resume: { queued: 'queued', loading: 'queued', running: 'running', cancelling: 'cancelled' },
});

export function isFinal(status: TaskStatus): boolean {
  return (FINAL_STATUSES as readonly TaskStatus[]).includes(status);
}

export function isUnfinished(status: TaskStatus): status is UnfinishedStatus {
  return (UNFINISHED_STATUSES as readonly TaskStatus[]).includes(status);
}

export class TransitionError extends Error {
  override name = 'TransitionError';
}

/**
 * Throws unless `from -> to` is allowed. At startup the recovery table applies instead, where a
 * state may also stay as it is (a queued task stays queued, a resumed task stays running).
 */
export function assertTransition(from: TaskStatus, to: TaskStatus, phase: 'run' | 'recovery' = 'run'): void {
  if (phase === 'recovery') {
    if (isUnfinished(from) && Object.values(RECOVERY).some((table) => table[from] === to)) return;
    // A task found loading or running more than max_restarts times fails (LMSP 7.5).
    if ((from === 'loading' || from === 'running') && to === 'failed') return;
    throw new TransitionError(`recovery cannot move a task from ${from} to ${to}`);
  }
  if (!TRANSITIONS[from].includes(to)) throw new TransitionError(`a task cannot go from ${from} to ${to}`);
}

/** What a response's `status` is while its task is in each state (LMSP section 6). */
export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled';

export function responseStatusOf(status: TaskStatus, finishReason: string | null): ResponseStatus {
  switch (status) {
    case 'queued':
      return 'queued';
    case 'loading':
    case 'running':
    case 'cancelling':
      return 'in_progress';
    case 'completed':
      return finishReason === 'max_output_tokens' ? 'incomplete' : 'completed';
    case 'failed':
      return 'failed';
    case 'cancelled':
      return 'cancelled';
  }
}
