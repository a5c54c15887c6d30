/**
 * The writer thread: creates (`TaskCreate`, plain data) are written by a worker thread with a
 * connection of its own (`writer-worker.ts`), so the thread that parses HTTP never runs a create's
 * inserts, its COMMIT or the fsync inside it (`synchronous = FULL`). The worker group-commits what
 * arrives together, as `Database.write` does, and answers each create only after its commit:
 * a 202 still means the task is on disk.
 *
 * The thread starts with the first create and exits after a while without any, so an idle
 * service keeps no thread (and no connection) for it; while it starts, creates are written on
 * the request thread, the same way and under the same checks (`applyTaskCreate`). Both
 * connections take SQLite's write lock with BEGIN IMMEDIATE and wait for it up to the busy
 * timeout, so the two writers are serialised by SQLite and a client never sees SQLITE_BUSY.
 */
import { Worker } from 'node:worker_threads';
import { ServiceError, type ErrorCode } from '../domain/errors.js';
import type { TaskCreate, TaskCreateOutcome } from './task-create.js';

export interface WriterSettings {
  dataDir: string;
  /** LMSP_DEBUG_DB_MAX_PAGES, as on the other connections (0: none). */
  dbMaxPages: number;
}

/** A create's failure as it crosses the thread boundary. */
export type WriterFailure =
  | { kind: 'service'; code: ErrorCode; message: string; param: string | null; headers: Record<string, string> }
  | { kind: 'other'; message: string };

export type WriterRequest = { type: 'creates'; batch: Array<{ id: number; command: TaskCreate }> } | { type: 'stop' };
export type WriterReply =
  | { type: 'ready' }
  | {
    type: 'done';
    results: Array<{ id: number; outcome: TaskCreateOutcome } | { id: number; failure: WriterFailure }>;
    /** Rows the writer's connection has written since it opened (`total_changes()`). */
    changes: number;
    /** How long each of its transactions took, BEGIN to COMMIT. */
    commits: number[];
  };

/** A writer that has had no create for this long exits; the next create starts another. */
const IDLE_EXIT_MS = 10_000;

export function failureOf(error: unknown): WriterFailure {
  if (error instanceof ServiceError) {
    return { kind: 'service', code: error.code, message: error.message, param: error.param, headers: error.headers };
  }
  return { kind: 'other', message: error instanceof Error ? error.message : String(error) };
}

function errorOf(failure: WriterFailure): Error {
  if (failure.kind === 'service') return new ServiceError(failure.code, failure.message, { param: failure.param, headers: failure.headers });
  return new Error(failure.message);
}

interface Waiting {
  resolve: (outcome: TaskCreateOutcome) => void;
  reject: (error: unknown) => void;
  /** The thread the create was sent to (set when sent). */
  thread: Worker | null;
}

export class TaskWriter {
  private worker: Worker | null = null;
  private ready = false;
  private closed = false;
  private queue: Array<{ id: number; command: TaskCreate }> = [];
  private flushScheduled = false;
  private readonly waiting = new Map<number, Waiting>();
  private nextId = 1;
  private lastCreate = 0;
  private idleTimer: NodeJS.Timeout | null = null;
  private readyWaiters: Array<{ resolve: () => void; reject: (error: Error) => void }> = [];
  /** Rows written by writer threads that have exited, and by each live one so far. */
  private changesOfRetired = 0;
  private readonly changesOfLive = new Map<Worker, number>();

  /**
   * `fallback` writes a create on the request thread's connection, while the thread starts.
   * `onCommit` is told the duration of each of the thread's transactions (LMSP 15: metrics).
   */
  constructor(private readonly settings: WriterSettings,
    private readonly fallback: (command: TaskCreate) => Promise<TaskCreateOutcome>,
    private readonly onCommit: (seconds: number) => void = () => {}) {}

  /** Rows the writer threads have written; with the request thread's, what tells the WAL has grown. */
  get changes(): number {
    let changes = this.changesOfRetired;
    for (const live of this.changesOfLive.values()) changes += live;
    return changes;
  }

  /** Whether creates go to the thread now (it has started and opened its connection). */
  get running(): boolean {
    return this.ready;
  }

  /** Starts the thread if it is not running; resolves once creates go to it. */
  whenRunning(): Promise<void> {
    this.ensureWorker();
    if (this.ready) return Promise.resolve();
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  /** Writes a create; resolves after the transaction holding it has committed. */
  submit(command: TaskCreate): Promise<TaskCreateOutcome> {
    if (this.closed) return Promise.reject(new ServiceError('storage_unavailable', 'The service is shutting down.'));
    this.lastCreate = performance.now();
    this.ensureWorker();
    if (!this.ready) return this.fallback(command);
    return new Promise<TaskCreateOutcome>((resolve, reject) => {
      const id = this.nextId++;
      this.waiting.set(id, { resolve, reject, thread: null });
      this.queue.push({ id, command });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        // What arrives in the same turn of the event loop goes over as one message.
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    const worker = this.worker;
    if (!worker || !this.ready) {
      // The thread went away between submit and now: these creates were never sent.
      for (const { id, command } of batch) {
        const waiting = this.waiting.get(id)!;
        this.waiting.delete(id);
        this.fallback(command).then(waiting.resolve, waiting.reject);
      }
      return;
    }
    for (const { id } of batch) this.waiting.get(id)!.thread = worker;
    worker.postMessage({ type: 'creates', batch } satisfies WriterRequest);
  }

  private ensureWorker(): void {
    if (this.worker) return;
    const worker = new Worker(new URL('./writer-worker.js', import.meta.url), { workerData: this.settings });
    this.worker = worker;
    this.changesOfLive.set(worker, 0);
    worker.on('message', (message: WriterReply) => {
      if (message.type === 'ready') {
        if (this.worker !== worker) return;
        this.ready = true;
        for (const waiter of this.readyWaiters.splice(0)) waiter.resolve();
        return;
      }
      this.changesOfLive.set(worker, message.changes);
      for (const seconds of message.commits) this.onCommit(seconds);
      for (const result of message.results) {
        const waiting = this.waiting.get(result.id);
        if (!waiting) continue;
        this.waiting.delete(result.id);
        if ('outcome' in result) waiting.resolve(result.outcome);
        else waiting.reject(errorOf(result.failure));
      }
    });
    // A thread that fails to start (or dies) leaves its creates unanswered: they get 503, as
    // on a storage failure, and the next create starts another thread.
    worker.on('error', () => undefined);
    worker.on('exit', () => {
      if (this.worker === worker) {
        this.worker = null;
        this.ready = false;
        for (const waiter of this.readyWaiters.splice(0)) waiter.reject(new Error('the writer thread stopped'));
      }
      this.changesOfRetired += this.changesOfLive.get(worker) ?? 0;
      this.changesOfLive.delete(worker);
      for (const [id, waiting] of this.waiting) {
        if (waiting.thread !== worker) continue;
        this.waiting.delete(id);
        waiting.reject(new ServiceError('storage_unavailable', 'The writer thread stopped before the create was committed.'));
      }
    });
    this.idleTimer ??= setInterval(() => this.retireIfIdle(), IDLE_EXIT_MS / 2);
    this.idleTimer.unref();
  }

  private retireIfIdle(): void {
    const worker = this.worker;
    if (!worker || this.waiting.size > 0 || this.queue.length > 0) return;
    if (performance.now() - this.lastCreate < IDLE_EXIT_MS) return;
    this.worker = null;
    this.ready = false;
    worker.postMessage({ type: 'stop' } satisfies WriterRequest);
  }

  /** Waits for the creates sent so far, then stops the thread. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.idleTimer) clearInterval(this.idleTimer);
    while (this.queue.length > 0 || this.flushScheduled || this.waiting.size > 0) {
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    const worker = this.worker;
    this.worker = null;
    this.ready = false;
    if (!worker) return;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.postMessage({ type: 'stop' } satisfies WriterRequest);
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 2000))]);
    await worker.terminate();
  }
}
