/**
 * LMSP 11.2 and 11.3: before the service accepts requests, every task left queued, loading,
 * running or cancelling gets its restart policy's outcome, each with its events in one
 * transaction (the tasks of up to two thousand positions share one, their status changes and
 * events written together at its end).
 */
import { isUnfinished, type RecoveryOutcome } from '../domain/tasks.js';
import type { StoredAnswer, Store } from '../store/index.js';
import { TASK_ID_HEADER } from './chat-completions.js';
import { finalAnswerOfRequest } from './orphaned-requests.js';
import type { TaskMachine } from './task-machine.js';

/** Positions per transaction: at most this many tasks change in one. */
const WINDOW = 2000;

export type RecoveryReport = Record<RecoveryOutcome, number> & {
  idempotencyKeysReleased: number; idempotencyKeysKept: number; deletedEphemeral: number;
};

/**
 * What a retry of a plain or streaming create gets once its request died with the process while
 * its task goes on (queued again, or resumed): the stream of that task from its first event, or
 * for a plain create that task's answer once it finishes, never a second task (LMSP 8). Null
 * when the task has ended (or is gone): its key is released, and a retry makes a new task.
 */
function answerForSurvivingTask(store: Store, taskId: string | null): StoredAnswer | null {
  const task = taskId === null ? null : store.tasks.get(taskId);
  if (!task || !isUnfinished(task.status)) return null;
  let stream: boolean;
  let headers: Record<string, string> | undefined;
  if (task.responseId !== null) {
    const header = store.responses.getHeader(task.responseId);
    if (!header) return null;
    stream = header.stream;
  } else if (task.completionId !== null) {
    const header = store.chatCompletions.getHeader(task.completionId);
    if (!header) return null;
    stream = header.stream;
    headers = { [TASK_ID_HEADER]: task.id };
  } else {
    return null;
  }
  return { status: 200, ...(headers ? { headers } : {}), ...(stream ? { streamTaskId: task.id } : { awaitTaskId: task.id }) };
}

/**
 * A request that died after its task had completed, before it could answer: its key gets the
 * answer the request was about to send, so a retry does not generate the same thing twice
 * (LMSP 8). Recovery never completes a task, so a completed one finished before the crash.
 */
function answerOfCompletedTask(store: Store, machine: TaskMachine, taskId: string | null): StoredAnswer | null {
  const task = taskId === null ? null : store.tasks.get(taskId);
  return task?.status === 'completed' ? finalAnswerOfRequest({ store, machine }, task) : null;
}

export function recoverUnfinishedTasks(store: Store, machine: TaskMachine, maxRestarts: number): RecoveryReport {
  const report: RecoveryReport = {
    unchanged: 0, failed: 0, cancelled: 0, requeued: 0, resumed: 0, idempotencyKeysReleased: 0, idempotencyKeysKept: 0, deletedEphemeral: 0,
  };
  // Tasks that stay as they are (LMSP 7.5) are only counted: no read, no write.
  report.unchanged = store.tasks.countUnchangedAtRecovery();
  // In creation order, a window of positions per transaction: neighbouring tasks have their
  // events on neighbouring pages. A resumed task stays running; no later window comes back to it.
  const last = store.tasks.maxSeq();
  // `store: false` tasks that recovery ends, deleted once their keys have their answers (below).
  const ephemeral: string[] = [];
  for (let after = 0; after < last; after += WINDOW) {
    store.db.transaction((transaction) => {
      // The window's moves are written together when it ends (`deferring`): nothing else writes at startup.
      const context = store.lifecycle.deferring(transaction);
      const window = store.tasks.toRecover(after, after + WINDOW);
      // The partial texts the window's events carry, read in one statement per kind.
      const texts = machine.outputTexts(window.map(({ task }) => task));
      for (const { task, header } of window) {
        const outcome = machine.recover(context, task, maxRestarts, header ?? undefined, texts.get(task.id));
        report[outcome] += 1;
        // `store: false` responses and chat completions that have now finished are not kept (LMSP 6, 13).
        const kept = header ? header.store : task.completionId === null || (store.chatCompletions.getHeader(task.completionId)?.store ?? true);
        if ((outcome === 'failed' || outcome === 'cancelled') && !kept) ephemeral.push(task.id);
      }
      context.flush();
    });
  }
  // Requests that were still being answered died with the process. Their keys are settled once
  // their tasks have their outcome: a crash before this leaves them in flight for the next start.
  const keys = store.db.transaction(() => store.idempotency.settleInFlight((taskId) =>
    answerForSurvivingTask(store, taskId) ?? answerOfCompletedTask(store, machine, taskId)));
  report.idempotencyKeysReleased = keys.released;
  report.idempotencyKeysKept = keys.kept;
  // A key that a previous start left waiting for a `store: false` task (its request had died then)
  // gets the answer that task ends with before the task goes: one that recovery has just ended,
  // or one that finished while a crash kept it from being settled. Otherwise a replay would find
  // neither the task nor an answer (LMSP 8).
  store.db.transaction(() => {
    const settled: string[] = [];
    for (const { key, taskId } of store.idempotency.pointingAtFinishedUnstored()) {
      const task = store.tasks.get(taskId);
      const answer = task ? finalAnswerOfRequest({ store, machine }, task) : null;
      if (answer) store.idempotency.complete(key, answer);
      else store.idempotency.release(key);
      settled.push(taskId);
    }
    for (const id of new Set([...ephemeral, ...settled])) {
      if (store.lifecycle.deleteFinished(id)) report.deletedEphemeral += 1;
    }
  });
  return report;
}
