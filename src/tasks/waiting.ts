/** Waiting on a task, and what a client that leaves does to it (LMSP section 6). */
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

/**
 * Cancels a task whose client went away, as a cancel request would; a finished task stays as it
 * is. A connection the stopping service closed is no client leaving: nothing is recorded.
 */
export async function cancelForDisconnect(core: Pick<TaskCore, 'store' | 'machine' | 'stopping'>, taskId: string): Promise<void> {
  if (core.stopping) return;
  await core.store.db.write((context) => core.machine.cancel(context, taskId)).catch(() => undefined);
}
