/**
 * LMSP 11.2 and 11.3: before the service accepts requests, every task left queued, loading,
 * running or cancelling gets its restart policy's outcome, each with its events in one
 * transaction (a thousand tasks share one).
 */
import type { Store } from '../store/index.js';
import type { RecoveryOutcome } from '../store/task-lifecycle.js';

const BATCH = 1000;

export type RecoveryReport = Record<RecoveryOutcome, number> & { idempotencyKeysReleased: number; deletedEphemeral: number };

export function recoverUnfinishedTasks(store: Store, maxRestarts: number): RecoveryReport {
  const report: RecoveryReport = { unchanged: 0, failed: 0, cancelled: 0, requeued: 0, resumed: 0, idempotencyKeysReleased: 0, deletedEphemeral: 0 };
  // Requests that were still being answered died with the process: their keys are released.
  report.idempotencyKeysReleased = store.db.transaction(() => store.idempotency.releaseInFlight());
  const unfinished = store.tasks.unfinished();
  // A queued task under retry or resume stays as it is (LMSP 7.5): no read, no write.
  const toRecover = unfinished.filter((task) => task.status !== 'queued' || task.onRestart === 'fail');
  report.unchanged = unfinished.length - toRecover.length;
  for (let start = 0; start < toRecover.length; start += BATCH) {
    const seqs = toRecover.slice(start, start + BATCH).map((task) => task.seq);
    store.db.transaction((context) => {
      for (const task of store.tasks.getMany(seqs)) {
        const outcome = store.lifecycle.recover(context, task, maxRestarts);
        report[outcome] += 1;
        // `store: false` responses that have now finished are not kept (LMSP section 6).
        if ((outcome === 'failed' || outcome === 'cancelled') && store.responses.getHeader(task.responseId)?.store === false) {
          store.lifecycle.deleteFinished(task.id);
          report.deletedEphemeral += 1;
        }
      }
    });
  }
  return report;
}
