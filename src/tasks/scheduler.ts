/**
 * The scheduler: `parallel` generation slots, filled first with tasks resumed at startup, then
 * with queued tasks, round robin between clients and FIFO within one (fair-queue.ts). Each task
 * runs in a worker that moves it through loading and running, streams its output into the log as delta events (with the token ids that
 * make the resume snapshot) and records how it ended. A cancel accepted by the store reaches the
 * worker through the event bus and stops the generation. When the runner process dies under a
 * generation, the task's restart policy applies as at startup (LMSP 7.5): a resumed task stays
 * running and a requeued one queued, and the next free slot takes it up again, on a fresh
 * runner process, the way it takes up tasks resumed or left queued at startup.
 */
import { isStorageUnavailable } from '../domain/errors.js';
import { EngineError, EngineExited, GenerationCancelled, type Engine, type EngineLease, modelRefOf, type ModelRef, type OutputUnit } from '../engine/engine.js';
import type { GeneratedToolCall } from '../engine/types.js';
import type { Store } from '../store/index.js';
import type { RecoveryOutcome, Task } from '../domain/tasks.js';
import type { TaskCore } from './core.js';
import { FairQueue } from './fair-queue.js';
import { engineExit, type TaskMachine } from './task-machine.js';

export interface SchedulerLog {
  info(message: string, fields?: object): void;
  warn(message: string, fields?: object): void;
  error(message: string, fields?: object): void;
}

interface Claim {
  abort: AbortController;
  done: Promise<void>;
}

/**
 * Generated output is committed at most this often per generation. A commit costs an fsync and
 * the service's CPU, which the runner shares: at one commit per token, streaming on 2 cores was
 * measurably slower than llama.cpp alone. Deltas then carry the tokens generated meanwhile.
 */
const OUTPUT_COMMIT_INTERVAL_MS = 20;

/**
 * Coalesces output into as few transactions as the database allows: units that arrive while a
 * write is waiting or queued join that write, so a commit carries whatever was generated since
 * the last one.
 */
class OutputWriter {
  private units: OutputUnit[] = [];
  private pending: Promise<void> | null = null;
  private lastWriteAt = -Infinity;
  /** Ends the wait before a write that OUTPUT_COMMIT_INTERVAL_MS put off, if any. */
  private writeNow: (() => void) | null = null;
  failure: unknown = null;

  constructor(private readonly store: Store, private readonly machine: TaskMachine, private readonly taskId: string,
    private readonly onRejected: () => void) {}

  push(units: OutputUnit[]): void {
    // After a failed write, nothing more is recorded for this generation: the failed batch is
    // gone, so a later one would leave a hole in the snapshot and break an exact resume.
    if (this.failure !== null) return;
    this.units.push(...units);
    if (this.pending) return;
    // One commit (one fsync) per OUTPUT_COMMIT_INTERVAL_MS at most: the first tokens go out at
    // once, later ones in deltas of what arrived meanwhile.
    const wait = this.lastWriteAt + OUTPUT_COMMIT_INTERVAL_MS - performance.now();
    const due = wait > 0
      ? new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.writeNow = () => {
          clearTimeout(timer);
          resolve();
        };
      })
      : Promise.resolve();
    this.pending = due.then(() => {
      this.writeNow = null;
      return this.store.db.write((context) => {
        const batch = this.units;
        this.units = [];
        this.pending = null;
        this.lastWriteAt = performance.now();
        return this.machine.appendOutput(context, this.taskId, batch);
      });
    }).then((accepted) => {
      if (!accepted) this.onRejected();
    }, (error: unknown) => {
      this.pending = null;
      this.failure ??= error;
      this.onRejected();
    });
  }

  /** Writes what is waiting now (the generation ended or stopped), then waits for it. */
  async flush(): Promise<void> {
    this.writeNow?.();
    while (this.pending) await this.pending;
    if (this.units.length > 0 && this.failure === null) {
      this.push([]);
      await this.flush();
    }
  }
}

/**
 * LMSP 5: a task's error is shown to its client, who may lack `models:write` and must never see
 * a file-system path (llama.cpp's own messages name the model file). The log keeps the original.
 */
export function withoutPaths(message: string): string {
  // An http(s) URL (the source of a pull, which its client gave) is no file-system path: it stays.
  // A path starts after a space, a quote or a bracket, not inside a word: "roles must alternate
  // user/assistant/user" (a chat template's words) is no path.
  return message.replace(/\bhttps?:\/\/[^\s'"`<>]*|((?<![\w.~-])(?:[A-Za-z]:)?(?:[\\/][^\s'"`:;,()[\]<>]+){2,}[\\/]?)/g,
    (match, path: string | undefined) => (path === undefined ? match : '<file>'));
}

/** After the database refused a write, work waits this long (doubling, up to a minute). */
const STORAGE_BACKOFF_MS = { first: 1000, max: 60_000 };

export class Scheduler {
  private readonly claims = new Map<string, Claim>();
  private stopped = false;
  /** While storage fails, starting (or resuming) tasks would only fail again: wait instead. */
  private pausedUntil = 0;
  private backoffMs = 0;
  private resumeTimer: NodeJS.Timeout | null = null;

  private readonly store: Store;
  private readonly machine: TaskMachine;
  private readonly engine: Engine;
  private queue: FairQueue | null = null;

  constructor(private readonly core: TaskCore, private readonly options: {
    parallel: number;
    maxRestarts: number;
    log: SchedulerLog;
    /** Told what a task's restart policy did when its runner process died (LMSP 15: metrics). */
    onInterrupted?: (outcome: RecoveryOutcome) => void;
  }) {
    this.store = core.store;
    this.machine = core.machine;
    this.engine = core.engine;
  }

  start(): void {
    this.queue = new FairQueue(this.store.tasks);
    this.engine.onCapacity(() => this.pump());
    // A cancel accepted anywhere (HTTP, a disconnecting client) reaches the worker here.
    this.core.bus.onAnyTask((task, previous) => {
      if (task.status === 'cancelling') this.claims.get(task.id)?.abort.abort();
      else if (task.status === 'queued') {
        this.queue?.noteQueued(task.clientId);
        this.pump();
      } else if (previous === 'queued') {
        // A queued task cancelled may have held the turn (its model could not load yet), and the
        // free slot it kept waiting goes to the next task now.
        this.pump();
      }
    });
    this.pump();
  }

  /** Ids of the tasks being worked on now. */
  get activeTaskIds(): string[] {
    return [...this.claims.keys()];
  }

  /** Fills free slots with the next runnable tasks. */
  pump(): void {
    if (this.stopped || !this.queue || Date.now() < this.pausedUntil) return;
    while (this.claims.size < this.options.parallel) {
      // Tasks resumed at startup first, then the queue, fairly between clients (LMSP 16).
      const task = this.store.tasks.nextResumed(this.claims.keys()) ?? this.queue.next(this.claims.keys());
      if (!task) return;
      const model = this.core.registry.get(task.model);
      const ref = model ? modelRefOf(model) : null;
      const lease = ref ? this.engine.acquire(ref) : null;
      if (ref && !lease) return; // no capacity for this model yet: FIFO, so wait
      const queue = this.queue;
      queue.served(task.clientId);
      const abort = new AbortController();
      const claim: Claim = { abort, done: Promise.resolve() };
      this.claims.set(task.id, claim);
      let requeued = false;
      claim.done = this.run(task, lease && ref ? { lease, model: ref } : null, abort).then((again) => {
        requeued = again;
      }).finally(() => {
        lease?.release();
        this.claims.delete(task.id);
        queue.released(task.clientId);
        // Queued again while still claimed, the task was hidden from the queue, which may have
        // let its client leave the line meanwhile: it joins again now that the task can be seen.
        if (requeued) queue.noteQueued(task.clientId);
        this.pump();
      });
    }
  }

  private write<T>(work: Parameters<Store['db']['write']>[0]): Promise<T> {
    return this.store.db.write(work) as Promise<T>;
  }

  /** Works on the task until it ends or stops; true when its runner died and its policy queued it again. */
  private async run(task: Task, leased: { lease: EngineLease; model: ModelRef } | null, abort: AbortController): Promise<boolean> {
    const { store, machine } = this;
    const lease = leased?.lease ?? null;
    let output: OutputWriter | null = null;
    try {
      const resumed = task.status === 'running';
      // One its worker let go, when the database could not record its next step, goes on from
      // where it was left: loading (without a second `loading` event), or cancelling (the cancel
      // is recorded once the load would run: a cancel wins).
      if (task.status === 'queued' && (!lease || lease.needsLoad)) {
        if (!(await this.write<Task | null>((c) => machine.startLoading(c, task.id)))) return false;
      }
      if (!lease) throw new EngineError('model_not_found', `the model '${task.model}' is no longer registered`);
      const loads = lease.needsLoad;
      if (loads) {
        const verified = await this.core.registry.checkBeforeLoad(task.model);
        await lease.load(abort.signal, this.core.registry.confirmUnchanged(verified));
      }
      if (!resumed && !(await this.write<Task | null>((c) => machine.startRunning(c, task.id)))) {
        // A cancel accepted after the load had ended, or while a load that does not watch for it
        // finished: nothing else will end the task, so the worker records the cancel now.
        await this.write((c) => machine.finishCancel(c, task.id));
        return false;
      }
      // A runner that held the model already: its file is still the one hashed (LMSP 5).
      if (!loads) await this.core.registry.checkLoaded(task.model);

      const current = store.tasks.get(task.id);
      if (!current) return false;
      const plan = machine.generationPlan(current);
      if (!plan) throw new Error(`tasks of kind ${current.kind} do not generate`);
      const resumeTokens = resumed ? store.events.snapshotTokens(task.id, current.outputStartSeq) : [];
      if (resumed) this.options.log.info('resuming task', { task: task.id, tokens: resumeTokens.length });
      output = new OutputWriter(store, machine, task.id, () => abort.abort());
      const writer = output;
      let toolCalls: GeneratedToolCall[] = [];
      const finishReason = await lease.generate(
        { ...plan, taskId: task.id, resumeTokens },
        {
          onPrompt: (inputTokens) => {
            this.store.db.write((c) => machine.setInputTokens(c, task.id, inputTokens)).catch(() => undefined);
          },
          onOutput: (units) => writer.push(units),
          onToolCalls: (calls) => {
            toolCalls = calls;
          },
        },
        abort.signal,
      );
      await writer.flush();
      if (writer.failure) throw writer.failure;
      await this.write((c) => machine.complete(c, task.id, finishReason, toolCalls));
      this.backoffMs = 0;
      return false;
    } catch (error) {
      // LMSP 5: a model found not to match its digest is not kept loaded: its runners map a file
      // that changed under them (and would show as loaded while nothing can use it).
      if (leased && error instanceof EngineError && error.code === 'model_digest_mismatch') this.engine.unloadModel(leased.model);
      await output?.flush().catch(() => undefined);
      return (await this.recordFailure(task, error, output?.failure ?? null)) === 'requeued';
    }
  }

  /** Records how the task's run ended; for a run its runner's death ended, what its policy did. */
  private async recordFailure(task: Task, error: unknown, storageFailure: unknown): Promise<RecoveryOutcome | null> {
    const { machine } = this;
    const storageError = storageFailure ?? (isStorageUnavailable(error) ? error : null);
    if (storageError || this.stopped) {
      // Nothing more can be recorded now: the task stays as it is on disk (a running task is
      // picked up again and resumes from what was committed), after a pause, so that a full or
      // read-only disk does not turn into a loop that regenerates the same tokens.
      if (storageError) {
        this.backoffMs = Math.min(STORAGE_BACKOFF_MS.max, this.backoffMs === 0 ? STORAGE_BACKOFF_MS.first : this.backoffMs * 2);
        this.pausedUntil = Date.now() + this.backoffMs;
        this.options.log.error('cannot record task progress; pausing work', { task: task.id, error: String(storageError), retry_in_ms: this.backoffMs });
        if (this.resumeTimer) clearTimeout(this.resumeTimer);
        this.resumeTimer = setTimeout(() => this.pump(), this.backoffMs + 10);
        this.resumeTimer.unref();
      }
      return null;
    }
    try {
      if (error instanceof GenerationCancelled) {
        const cancelled = await this.write((c) => machine.finishCancel(c, task.id));
        // Its runner died under it before the cancel was done: counted with the other tasks a
        // runner's death ended, by what that did (LMSP 7.5: cancelling -> cancelled).
        if (cancelled && error.runnerDied) {
          this.options.log.warn('the runner process died under the task while it was cancelled', { task: task.id });
          this.options.onInterrupted?.('cancelled');
          return 'cancelled';
        }
      } else if (error instanceof EngineExited) {
        // The task did nothing wrong: its policy decides, the death counting as a restart.
        const outcome = await this.write<RecoveryOutcome | null>((c) =>
          machine.interrupt(c, task.id, this.options.maxRestarts, engineExit(withoutPaths(error.message))));
        this.options.log.warn('the runner process died under the task; its restart policy applied', { task: task.id, outcome, error: error.message });
        if (outcome) this.options.onInterrupted?.(outcome);
        return outcome;
      } else if (error instanceof EngineError) {
        this.options.log.warn('task failed', { task: task.id, code: error.code, error: error.message });
        await this.write((c) => machine.fail(c, task.id, error.code, withoutPaths(error.message)));
      } else {
        this.options.log.error('task failed unexpectedly', { task: task.id, error: String((error as Error)?.stack ?? error) });
        await this.write((c) => machine.fail(c, task.id, 'engine_error', withoutPaths((error as Error)?.message ?? String(error))));
      }
    } catch (writeError) {
      this.options.log.error('cannot record task outcome', { task: task.id, error: String(writeError) });
    }
    return null;
  }

  /** Stops taking work and abandons the running generations without recording anything: the
   * tasks stay as they are on disk and are recovered by their restart policy at the next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.resumeTimer) clearTimeout(this.resumeTimer);
    for (const claim of this.claims.values()) claim.abort.abort();
    await Promise.allSettled([...this.claims.values()].map((claim) => claim.done));
  }
}
