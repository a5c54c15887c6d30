/**
 * Reads the event bus (one notification after each commit that changed a task, with the task as
 * committed) and tells what happened in the domain's words: a status change and how long the task
 * spent in the status it left, a start after waiting in the queue, the first output of a run, and
 * tokens generated. Metrics and logs both listen here, so neither rediscovers transitions from raw
 * notifications, and neither adds a query or a write: everything comes from the committed state.
 *
 * It keeps a small record per unfinished task it has seen, dropped when the task finishes.
 */
import { isFinal, type Task, type TaskStatus } from '../domain/tasks.js';
import type { TaskEventBus } from './event-bus.js';

export interface StatusChange {
  task: Task;
  /** The status it left; null for a task created now. */
  from: TaskStatus | null;
  to: TaskStatus;
  /** Milliseconds in the status it left, when this process saw it enter that status. */
  msInPrevious: number | null;
  /** The change was made by recovery at startup (LMSP 11.3). */
  recovery: boolean;
}

export interface TaskTimelineListener {
  statusChanged?(change: StatusChange): void;
  /** A task left the queue for loading or running: seconds since its creation or its requeue. */
  queueWaited?(task: Task, seconds: number): void;
  /** The first output of a run: seconds since it became running. */
  firstOutput?(task: Task, seconds: number): void;
  /** Output tokens committed since the previous notification. */
  tokensGenerated?(task: Task, count: number): void;
}

interface Seen {
  status: TaskStatus;
  /** When it entered `status` (epoch ms). */
  since: number;
  /** When it was queued (created or requeued), if this process saw it. */
  queuedAt: number | null;
  /** When the current run became running; null for a run resumed at startup (no fresh start). */
  runningAt: number | null;
  outputTokens: number;
}

export class TaskTimeline {
  private readonly seen = new Map<string, Seen>();
  private readonly listeners = new Set<TaskTimelineListener>();
  private recovering = false;
  private readonly unsubscribe: () => void;

  constructor(bus: TaskEventBus, private readonly now: () => number = Date.now) {
    this.unsubscribe = bus.onAnyTask((task, previous) => this.observe(task, previous));
  }

  listen(listener: TaskTimelineListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Changes between these calls are recovery's (LMSP 11.3), not a run's. */
  beginRecovery(): void {
    this.recovering = true;
  }

  endRecovery(): void {
    this.recovering = false;
  }

  /** Unfinished tasks being followed (a test and a leak check read it). */
  get size(): number {
    return this.seen.size;
  }

  close(): void {
    this.unsubscribe();
    this.listeners.clear();
    this.seen.clear();
  }

  private emit<K extends keyof TaskTimelineListener>(method: K, ...args: Parameters<NonNullable<TaskTimelineListener[K]>>): void {
    for (const listener of this.listeners) {
      try {
        (listener[method] as ((...a: typeof args) => void) | undefined)?.(...args);
      } catch {
        // an observer must never disturb the commit that notified it
      }
    }
  }

  private observe(task: Task, previous: TaskStatus | null): void {
    const now = this.now();
    const known = this.seen.get(task.id);
    const entry: Seen = known ?? { status: task.status, since: now, queuedAt: null, runningAt: null, outputTokens: task.outputTokens };
    // A task this process had not seen (found at recovery, say) is told apart by its status before the commit.
    if (!known || known.status !== task.status) this.statusChanged(task, known ? known.status : previous, !known, entry, now);
    if (task.status === 'running' || task.status === 'cancelling') this.outputChanged(task, entry, now);
    if (isFinal(task.status)) this.seen.delete(task.id);
    else this.seen.set(task.id, entry);
  }

  private statusChanged(task: Task, from: TaskStatus | null, unseen: boolean, entry: Seen, now: number): void {
    const to = task.status;
    this.emit('statusChanged', { task, from, to, msInPrevious: unseen ? null : now - entry.since, recovery: this.recovering });
    entry.status = to;
    entry.since = now;
    if (to === 'queued') {
      // Created, or queued again by recovery (LMSP 7.5): the wait starts now.
      entry.queuedAt = now;
      entry.runningAt = null;
      entry.outputTokens = task.outputTokens;
      return;
    }
    if (this.recovering) {
      // A run resumed at startup continues; its first output is not a fresh start's.
      entry.outputTokens = task.outputTokens;
      return;
    }
    // Leaving the queue. A task never seen queued was left queued by a restart: its wait
    // counts from its creation (whole seconds, as stored).
    if ((to === 'loading' || to === 'running') && (from === 'queued' || unseen)) {
      const queuedAt = entry.queuedAt ?? task.createdAt * 1000;
      this.emit('queueWaited', task, Math.max(0, now - queuedAt) / 1000);
    }
    if (to === 'running') {
      entry.runningAt = now;
      entry.outputTokens = task.outputTokens;
    }
  }

  private outputChanged(task: Task, entry: Seen, now: number): void {
    const added = task.outputTokens - entry.outputTokens;
    entry.outputTokens = task.outputTokens;
    if (added <= 0) return;
    if (entry.runningAt !== null) {
      this.emit('firstOutput', task, (now - entry.runningAt) / 1000);
      entry.runningAt = null;
    }
    this.emit('tokensGenerated', task, added);
  }
}
