/**
 * LMSP 12 (Logs): every task status change, once, at info level, with the task, its kind, its
 * client and how long it spent in the status it left. Ids and counts only: never a prompt, an
 * output, a token or a pairing code.
 */
import type { StatusChange, TaskTimeline } from './task-timeline.js';

export type TaskLogSink = (fields: Record<string, unknown>, message: string) => void;

export function describeStatusChange(change: StatusChange, now = Date.now()): { fields: Record<string, unknown>; message: string } {
  const { task } = change;
  const fields: Record<string, unknown> = {
    task: task.id,
    kind: task.kind,
    client: task.clientId,
    model: task.model,
    from: change.from,
    status: change.to,
    attempt: task.attempt,
  };
  if (change.msInPrevious !== null) fields.ms = change.msInPrevious;
  if (change.recovery) fields.recovery = true;
  if (task.finishedAt !== null) {
    fields.total_ms = Math.max(0, now - task.createdAt * 1000);
    fields.output_tokens = task.outputTokens;
  }
  if (task.error) fields.error = task.error.code;
  const message = change.recovery ? `task ${change.to} at startup` : `task ${change.to}`;
  return { fields, message };
}

/** Logs each status change the timeline reports; returns the function that stops it. */
export function logTaskChanges(timeline: TaskTimeline, sink: TaskLogSink): () => void {
  return timeline.listen({
    statusChanged: (change) => {
      const { fields, message } = describeStatusChange(change);
      sink(fields, message);
    },
  });
}
