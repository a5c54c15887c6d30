/**
 * The events of a `model_pull` task (LMSP 5.1), as drafts for the task's log. Every event but
 * `model.pull.progress` carries the task as it is once the event is written; progress carries
 * only the bytes, since it comes once a second for as long as the download runs.
 */
import type { ModelPull } from '../domain/pulls.js';
import type { EventDraft, Task } from '../domain/tasks.js';
import type { ModelObject } from './types.js';
import { toTaskObject } from './views.js';

export const PULL_TERMINAL_EVENTS = ['model.pull.completed', 'model.pull.failed', 'model.pull.cancelled'] as const;

/** What the pull's events are made from: its record and, once registered, its model. */
export interface PullSubject {
  pull: ModelPull;
  model: ModelObject | null;
}

function withTask(type: string, extra: (task: Task) => object = () => ({})): EventDraft {
  return { type, payload: (task) => ({ task: toTaskObject(task), ...extra(task) }) };
}

export const pullEvents = {
  created: ({ pull }: PullSubject): EventDraft[] => [withTask('model.pull.created', () => ({
    source: pull.source, model_id: pull.modelId, digest: pull.expectedDigest,
  }))],
  running: (): EventDraft[] => [withTask('model.pull.in_progress')],
  progress: (downloadedBytes: number, totalBytes: number | null): EventDraft[] => [{
    type: 'model.pull.progress',
    payload: (task) => ({ task_id: task.id, downloaded_bytes: downloadedBytes, total_bytes: totalBytes }),
  }],
  resumed: (downloadedBytes: number, totalBytes: number | null): EventDraft[] => [withTask('model.pull.resumed', () => ({
    downloaded_bytes: downloadedBytes, total_bytes: totalBytes,
  }))],
  /** LMSP 7.5: a pull put back in the queue at startup (under `retry`, it starts over). */
  requeued: (): EventDraft[] => [withTask('model.pull.queued')],
  cancelling: (): EventDraft[] => [withTask('model.pull.cancelling')],
  cancelled: (): EventDraft[] => [withTask('model.pull.cancelled')],
  failed: (): EventDraft[] => [withTask('model.pull.failed', (task) => ({ error: task.error }))],
  completed: ({ model }: PullSubject): EventDraft[] => [withTask('model.pull.completed', () => ({ model }))],
};
