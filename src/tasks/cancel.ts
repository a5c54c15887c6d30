/** Cancelling a task (LMSP 7.4), through `/v1/tasks/{id}/cancel` or `/v1/responses/{id}/cancel`. */
import type { Client } from '../domain/clients.js';
import { ServiceError } from '../domain/errors.js';
import type { Task } from '../domain/tasks.js';
import type { IdempotencyKey, StoredAnswer } from '../store/index.js';
import type { TaskCore } from './core.js';
import type { CancelOutcome } from './task-machine.js';

/** LMSP 7.4: 200 when the task is (now or already) cancelled, 202 while it is cancelling. */
export function cancelStatus(outcome: CancelOutcome): number {
  switch (outcome.kind) {
    case 'cancelled':
    case 'already_cancelled':
      return 200;
    case 'cancelling':
    case 'already_cancelling':
      return 202;
    case 'not_cancellable':
      throw new ServiceError('task_not_cancellable', `The task has already ${outcome.task.status === 'completed' ? 'completed' : 'failed'}.`);
  }
}

/**
 * One transaction holding the cancel, the idempotency key and its answer. `find` looks the task
 * up as the client may see it (inside the transaction); `view` is the object the answer carries.
 */
export async function cancelTask(core: Pick<TaskCore, 'store' | 'machine'>, client: Client, key: IdempotencyKey | null,
  find: (client: Client) => Task, view: (task: Task) => unknown): Promise<StoredAnswer & { replayed: boolean }> {
  const outcome = await core.store.idempotent(key, {
    actor: client.id,
    prepare: () => undefined,
    effect: (context) => {
      const task = find(client);
      const cancelled = core.machine.cancel(context, task.id);
      if (!cancelled) throw new ServiceError('not_found', `No task with id '${task.id}'.`);
      const answer: StoredAnswer = { status: cancelStatus(cancelled), body: view(core.store.tasks.get(task.id)!) };
      return { result: answer, record: { answer, taskId: task.id } };
    },
  });
  return 'replay' in outcome ? { ...outcome.replay, replayed: true } : { ...outcome.result, replayed: false };
}
