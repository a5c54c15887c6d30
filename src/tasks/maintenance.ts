/**
 * Runs the retention sweeper (LMSP section 10) and WAL checkpoints in a worker thread with its
 * own connection (maintenance-worker.ts). Deleting a million events takes seconds; done on the
 * thread that answers requests it would hold every request up, done here it holds up none.
 */
import { Worker } from 'node:worker_threads';
import { noneSwept, sweptAnything, type SweepCounts } from '../store/retention.js';
import { timerDelay } from '../time.js';

export interface MaintenanceSettings {
  dataDir: string;
  retentionMs: number;
  dbMaxPages: number;
  /**
   * A write-ahead log holding more than this after a checkpoint is made to start over (see
   * maintenance-worker.ts); lmsp uses its `journal_size_limit`.
   */
  walRestartBytes: number;
}

export type MaintenanceRequest = { type: 'sweep'; id: number } | { type: 'checkpoint' } | { type: 'stop' };
export type MaintenanceReply =
  | { type: 'swept'; id: number; counts: SweepCounts }
  | { type: 'failed'; id: number; message: string; code: string | null };

/** How often the WAL is checkpointed when something was written (the connection that answers requests never does it). */
const CHECKPOINT_INTERVAL_MS = 1000;
/** A worker with nothing to do for this long exits; the next sweep or checkpoint starts another (~10 MB saved while idle). */
const IDLE_EXIT_MS = 10_000;

export class Maintenance {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (counts: SweepCounts) => void; reject: (error: Error) => void }>();
  private sweeping: Promise<SweepCounts> | null = null;
  private timers: NodeJS.Timeout[] = [];
  private lastActivity = Date.now();
  private changesAtLastCheckpoint = -1;

  /**
   * `changes` counts the rows the request-serving connection has written; the WAL is
   * checkpointed only when it moved. `anythingToSweep` is a cheap indexed probe; a sweep with
   * nothing to delete starts no thread. So an idle service keeps no worker thread alive.
   */
  constructor(private readonly settings: MaintenanceSettings, private readonly sweepIntervalMs: number,
    private readonly log: { info: (counts: SweepCounts) => void; error: (message: string) => void },
    private readonly changes: () => number = () => NaN,
    private readonly anythingToSweep: () => boolean = () => true,
    /**
     * Whether the file at the database's path is still the one the service opened: a worker
     * opens it by path, and opened on a file put there since, it would write this database's log
     * into that file.
     */
    private readonly databaseInPlace: () => boolean = () => true) {}

  private ensureWorker(): Worker {
    this.lastActivity = Date.now();
    if (this.worker) return this.worker;
    const worker = new Worker(new URL('./maintenance-worker.js', import.meta.url), { workerData: this.settings });
    worker.on('message', (message: MaintenanceReply) => {
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      if (message.type === 'swept') waiting.resolve(message.counts);
      else waiting.reject(Object.assign(new Error(message.message), { code: message.code }));
    });
    worker.on('error', (error) => this.log.error(`maintenance worker failed: ${error.message}`));
    worker.on('exit', () => {
      // a worker retired while idle has no requests of its own; a replacement may already run
      if (this.worker !== worker) return;
      this.worker = null;
      for (const waiting of this.pending.values()) waiting.reject(new Error('the maintenance worker stopped'));
      this.pending.clear();
    });
    this.worker = worker;
    return worker;
  }

  /** One full sweep; concurrent calls share the sweep in progress. */
  sweep(): Promise<SweepCounts> {
    if (this.sweeping) return this.sweeping;
    let due = true;
    try {
      due = this.databaseInPlace() && this.anythingToSweep();
    } catch {
      // unknown: let the worker find out
    }
    if (!due) return Promise.resolve(noneSwept());
    this.sweeping = new Promise<SweepCounts>((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      this.ensureWorker().postMessage({ type: 'sweep', id } satisfies MaintenanceRequest);
    }).then((counts) => {
      if (sweptAnything(counts)) this.log.info(counts);
      return counts;
    }).finally(() => {
      this.sweeping = null;
    });
    return this.sweeping;
  }

  /** Sweeps every `sweep_interval` and checkpoints every second, until stopped. */
  start(options: { checkpointNow?: boolean } = {}): void {
    if (this.sweepIntervalMs !== Infinity) {
      this.timers.push(setInterval(() => {
        this.sweep().catch((error: Error) => this.log.error(`sweep failed (retried next time): ${error.message}`));
      }, timerDelay(this.sweepIntervalMs)));
    }
    // Small startup writes wait in the WAL for the next write; what recovery wrote is checkpointed
    // at the first tick.
    if (!options.checkpointNow) {
      try {
        this.changesAtLastCheckpoint = this.changes();
      } catch {
        // unknown: the first tick checkpoints
      }
    }
    this.timers.push(setInterval(() => this.tick(), CHECKPOINT_INTERVAL_MS));
    for (const timer of this.timers) timer.unref();
  }

  /** Checkpoints when something was written since the last time; retires a worker that idles. */
  private tick(): void {
    if (!this.databaseInPlace()) return;
    let changes: number;
    try {
      changes = this.changes();
    } catch {
      changes = NaN; // unknown, and unequal to anything: checkpoint anyway
    }
    if (changes !== this.changesAtLastCheckpoint) {
      this.changesAtLastCheckpoint = changes;
      this.ensureWorker().postMessage({ type: 'checkpoint' } satisfies MaintenanceRequest);
      return;
    }
    const worker = this.worker;
    if (worker && !this.sweeping && this.pending.size === 0 && Date.now() - this.lastActivity >= IDLE_EXIT_MS) {
      this.worker = null;
      worker.postMessage({ type: 'stop' } satisfies MaintenanceRequest);
    }
  }

  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    await this.sweeping?.catch(() => undefined);
    const worker = this.worker;
    if (!worker) return;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.postMessage({ type: 'stop' } satisfies MaintenanceRequest);
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 2000))]);
    await worker.terminate();
  }
}
