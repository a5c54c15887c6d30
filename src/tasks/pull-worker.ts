/**
 * The pull workers (LMSP 5.1): pulls are not generations, so they do not take the engine's slots.
 * At most `MAX_CONCURRENT_PULLS` download at once, beside any generations; pulls resumed at
 * startup first, then queued ones fairly between clients (LMSP 16: the client that has waited
 * longest for a slot first, its oldest pull first, fair-queue.ts). A cancel accepted by the store reaches the
 * worker through the event bus and stops the download within a second.
 */
import { isStorageUnavailable } from '../domain/errors.js';
import { MAX_CONCURRENT_PULLS } from '../domain/pulls.js';
import type { Task } from '../domain/tasks.js';
import type { PullSettings } from '../models/pull-source.js';
import { isStorageError } from '../store/db.js';
import type { TaskCore } from './core.js';
import { FairQueue } from './fair-queue.js';
import { endFaultyPull, PULL_CANCELLED, runPull, type RunPullOptions } from './pulls.js';
import type { SchedulerLog } from './scheduler.js';

interface Claim {
  abort: AbortController;
  done: Promise<void>;
}

/** Stopping the service: the pull stays as it is on disk and continues at the next start. */
const SERVICE_STOPPING = 'stopping';

/** After the database refused a write, pulls wait this long before starting again. */
const STORAGE_PAUSE_MS = 5000;

export class PullWorkers {
  private readonly claims = new Map<string, Claim>();
  private stopped = false;
  private started = false;
  private pausedUntil = 0;
  private pauseTimer: NodeJS.Timeout | null = null;
  private queue: FairQueue | null = null;

  constructor(private readonly core: Pick<TaskCore, 'store' | 'machine' | 'registry' | 'bus'>, readonly settings: PullSettings,
    private readonly options: { log: SchedulerLog; concurrency?: number }) {}

  start(): void {
    this.started = true;
    this.queue = new FairQueue(this.core.store.pulls);
    this.core.bus.onAnyTask((task: Task) => {
      if (task.kind !== 'model_pull') return;
      if (task.status === 'cancelling') this.claims.get(task.id)?.abort.abort(PULL_CANCELLED);
      else if (task.status === 'queued') {
        this.queue?.noteQueued(task.clientId);
        this.pump();
      }
    });
    this.pump();
  }

  get activeTaskIds(): string[] {
    return [...this.claims.keys()];
  }

  pump(): void {
    if (!this.started || this.stopped || !this.queue || Date.now() < this.pausedUntil) return;
    const limit = this.options.concurrency ?? MAX_CONCURRENT_PULLS;
    while (this.claims.size < limit) {
      const task = this.core.store.pulls.nextResumed(this.claims.keys()) ?? this.queue.next(this.claims.keys());
      if (!task) return;
      const queue = this.queue;
      queue.served(task.clientId);
      const abort = new AbortController();
      const claim: Claim = { abort, done: Promise.resolve() };
      this.claims.set(task.id, claim);
      claim.done = this.run(task.id, abort.signal).finally(() => {
        this.claims.delete(task.id);
        queue.released(task.clientId);
        this.pump();
      });
    }
  }

  private async run(taskId: string, signal: AbortSignal): Promise<void> {
    const { log } = this.options;
    const pullLog: NonNullable<RunPullOptions['log']> = (level, message, fields) => log[level](message, fields);
    try {
      await runPull(this.core, taskId, { settings: this.settings, signal, log: pullLog });
    } catch (error) {
      if (!isStorageError(error) && !isStorageUnavailable(error)) {
        // Not the database: a fault of this pull's own, which a pause would not mend. It ends
        // the pull, unless the database refuses that too.
        log.error('pull failed unexpectedly', { task: taskId, error: String(error) });
        const ended = await endFaultyPull(this.core, taskId, error, pullLog).then(() => true, () => false);
        if (ended) return;
      }
      // The database refused a write: the pull stays as it is on disk; try again after a pause.
      log.error('cannot record pull progress; pausing pulls', { task: taskId, error: String(error) });
      this.pausedUntil = Date.now() + STORAGE_PAUSE_MS;
      if (this.pauseTimer) clearTimeout(this.pauseTimer);
      this.pauseTimer = setTimeout(() => this.pump(), STORAGE_PAUSE_MS + 10);
      this.pauseTimer.unref();
    }
  }

  /** Stops the downloads without recording anything: each pull continues at the next start by its restart policy. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.pauseTimer) clearTimeout(this.pauseTimer);
    for (const claim of this.claims.values()) claim.abort.abort(SERVICE_STOPPING);
    await Promise.allSettled([...this.claims.values()].map((claim) => claim.done));
  }
}
