/** Tasks of kind `model_pull` (LMSP 5.1): their events are `model.pull.*`. */
import { rmSync } from 'node:fs';
import { pullEvents, type PullSubject } from '../api/pull-events.js';
import { toModelObject } from '../api/views.js';
import type { Task } from '../domain/tasks.js';
import { partialPathOf } from '../models/download.js';
import { partialSizeNow } from '../models/partial-file.js';
import type { Store } from '../store/index.js';
import type { TaskKindHandler } from './task-machine.js';

/** A progress report of a pull, as `TaskMachine.recordProgress` takes it. */
export interface PullProgressReport {
  downloadedBytes: number;
  totalBytes: number | null;
  /** The worker continued from bytes already on disk (`model.pull.resumed`), not a plain report. */
  resumed?: boolean;
}

export function pullKind(store: Store): TaskKindHandler<PullSubject> {
  return {
    kind: 'model_pull',
    load(task: Task): PullSubject {
      const pull = store.pulls.get(task.id);
      if (!pull) throw new Error(`the pull record of task ${task.id} is missing`);
      const model = task.status === 'running' || task.status === 'completed' ? store.models.get(pull.modelId) : null;
      return { pull, model: model && model.digest === pull.digest ? toModelObject(model, false, true) : null };
    },
    outputText: () => '',
    finalized({ pull }, task) {
      // LMSP 5.1: a cancelled or failed pull leaves no partial file, whoever ends it (its worker,
      // or recovery at startup under `fail`, or of a pull found cancelling).
      // Inside the transaction that ends the task: a name that cannot be removed (a folder put
      // there, a file made immutable) never keeps the task from ending. It is left for the next
      // pull of the id, which removes it or fails on it.
      if (task.status !== 'cancelled' && task.status !== 'failed') return;
      try {
        rmSync(partialPathOf(pull.modelsDir, pull.modelId), { force: true });
      } catch {
        // left behind, as above
      }
    },
    events: {
      created: (subject) => pullEvents.created(subject),
      loading: () => [],
      running: () => pullEvents.running(),
      output: () => [],
      finished: (subject) => pullEvents.completed(subject),
      failed: () => pullEvents.failed(),
      cancelling: () => pullEvents.cancelling(),
      cancelled: () => pullEvents.cancelled(),
      requeued: () => pullEvents.requeued(),
      // LMSP 5.1: after a restart, with the bytes already on disk (the worker continues from them).
      resumed: ({ pull }) => pullEvents.resumed(partialSizeNow(partialPathOf(pull.modelsDir, pull.modelId)), pull.resume?.totalBytes ?? null),
      progress: (_subject, report) => {
        const { downloadedBytes, totalBytes, resumed } = report as PullProgressReport;
        return resumed ? pullEvents.resumed(downloadedBytes, totalBytes) : pullEvents.progress(downloadedBytes, totalBytes);
      },
    },
  };
}
