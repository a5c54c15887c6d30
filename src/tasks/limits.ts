/** Limits on what one client may queue (LMSP section 16). */
import type { Client } from '../domain/clients.js';
import { ServiceError } from '../domain/errors.js';
import type { TaskCore } from './core.js';

export interface TaskLimits {
  /** `--max-unfinished-tasks-per-client`. */
  maxUnfinishedTasks: number;
}

/** Seconds a client is told to wait before creating again. */
const TASKS_RETRY_AFTER_SECONDS = 5;

/**
 * LMSP 16: past its unfinished tasks, a client's creates get 429 `too_many_tasks`. Called inside
 * the create's transaction, so concurrent creates cannot all slip under the limit.
 */
export function assertRoomForTask(core: Pick<TaskCore, 'store'>, client: Client, limits: TaskLimits): void {
  const unfinished = core.store.tasks.countUnfinishedForClient(client.id);
  if (unfinished >= limits.maxUnfinishedTasks) throw tooManyTasks(unfinished, limits);
}

/** The cap of a create written as data (`TaskCreate`), checked by the store inside its transaction. */
export function capOf(client: Client, limits: TaskLimits): { clientId: string; maxUnfinished: number } {
  return { clientId: client.id, maxUnfinished: limits.maxUnfinishedTasks };
}

/** LMSP 16: the 429 of a create refused at the cap. */
export function tooManyTasks(unfinished: number, limits: TaskLimits): ServiceError {
  return new ServiceError('too_many_tasks',
    `This client has ${unfinished} unfinished tasks, the most it may have (${limits.maxUnfinishedTasks}); wait for some to finish.`,
    { headers: { 'retry-after': String(TASKS_RETRY_AFTER_SECONDS) } });
}
