/** Waiting on a task, and what a client that leaves does to it (LMSP section 6). */
import { isStorageUnavailable, ServiceError } from '../domain/errors.js';
import { isFinal, type Task } from '../domain/tasks.js';
import type { TaskCore } from './core.js';

/** Resolves with the task once it has finished (or is gone). */
export function waitForFinish(core: Pick<TaskCore, 'store' | 'bus'>, taskId: string): Promise<Task | null> {
  return new Promise((resolve) => {
    const check = () => {
      const task = core.store.tasks.get(taskId);
      if (!task || isFinal(task.status)) {
        unsubscribe();
        resolve(task);
      }
    };
    const unsubscribe = core.bus.subscribe(taskId, check);
    check();
  });
}

/** Waits between tries of a write the database refused: the first, and the longest. */
const STORAGE_RETRY_MS = { first: 1000, max: 30_000 };

/**
 * Writes `work` once the database takes it: a write refused for storage (a full disk, a database
 * held by another program) is tried again, at growing intervals, until it is written or the
 * service stops (then what it would have recorded is settled at the next start). Other errors
 * are thrown.
 */
export async function writeWhenStored<T>(core: Pick<TaskCore, 'store' | 'stopping'>, work: Parameters<TaskCore['store']['db']['write']>[0]): Promise<T | undefined> {
  for (let wait = STORAGE_RETRY_MS.first; ; wait = Math.min(wait * 2, STORAGE_RETRY_MS.max)) {
    try {
      return await core.store.db.write(work) as T;
    } catch (error) {
      if (!isStorageUnavailable(error) || core.stopping) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, wait));
    if (core.stopping) return undefined;
  }
}

/**
 * Cancels a task whose client went away, as a cancel request would; a finished task stays as it
 * is. A connection the stopping service closed is no client leaving: nothing is recorded. A
 * database that cannot be written now gets the cancel once it can, so the task does not run on
 * to its end for nobody.
 */
export async function cancelForDisconnect(core: Pick<TaskCore, 'store' | 'machine' | 'stopping'>, taskId: string): Promise<void> {
  if (core.stopping) return;
  await writeWhenStored(core, (context) => core.machine.cancel(context, taskId)).catch(() => undefined);
}

/**
 * A create whose client waits on its task (plain, or streamed without `background`) cannot be
 * answered by a stopping service, which ends such waits at once: one that reaches it then (sent
 * behind another request on a kept-alive connection) is refused before anything is written,
 * rather than committed and cut off. A background create is still taken: its 202 or its stream
 * from the log needs no wait.
 */
export function refuseWaitWhileStopping(core: Pick<TaskCore, 'stopping'>): void {
  if (!core.stopping) return;
  throw new ServiceError('storage_unavailable', 'The service is stopping: the request did nothing. Send it again once the service is back.',
    { headers: { 'retry-after': '1' } });
}
