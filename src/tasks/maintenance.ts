/**
 * Runs the retention sweeper (LMSP section 10) and WAL checkpoints in a worker thread with its
 * own connection (maintenance-worker.ts). Deleting a million events takes seconds; done on the
 * thread that answers requests it would hold every request up, done here it holds up none.
 */
import { Worker } from 'node:worker_threads';
import type { SweepCounts } from '../store/retention.js';

export interface MaintenanceSettings {
  dataDir: string;
  retentionMs: number;
  dbMaxPages: number;
}

export type MaintenanceRequest = { type: 'sweep'; id: number } | { type: 'checkpoint' } | { type: 'stop' };
export type MaintenanceReply =
  | { type: 'swept'; id: number; counts: SweepCounts }
  | { type: 'failed'; id: number; message: string; code: string | null };

/** How often the WAL is checkpointed (the connection that answers requests never does it). */
const CHECKPOINT_INTERVAL_MS = 1000;

export class Maintenance {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (counts: SweepCounts) => void; reject: (error: Error) => void }>();
  private sweeping: Promise<SweepCounts> | null = null;
  private timers: NodeJS.Timeout[] = [];

  constructor(private readonly settings: MaintenanceSettings, private readonly sweepIntervalMs: number,
    private readonly log: { info: (counts: SweepCounts) => void; error: (message: string) => void }) {}

  private ensureWorker(): Worker {
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
      if (this.worker === worker) this.worker = null;
      for (const waiting of this.pending.values()) waiting.reject(new Error('the maintenance worker stopped'));
      this.pending.clear();
    });
    this.worker = worker;
    return worker;
  }

  /** One full sweep; concurrent calls share the sweep in progress. */
  sweep(): Promise<SweepCounts> {
    this.sweeping ??= new Promise<SweepCounts>((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      this.ensureWorker().postMessage({ type: 'sweep', id } satisfies MaintenanceRequest);
    }).then((counts) => {
      if (counts.tasks + counts.events + counts.idempotencyKeys + counts.pairingCodes > 0) this.log.info(counts);
      return counts;
    }).finally(() => {
      this.sweeping = null;
    });
    return this.sweeping;
  }

  /** Sweeps every `sweep_interval` and checkpoints every second, until stopped. */
  start(): void {
    if (this.sweepIntervalMs !== Infinity) {
      this.timers.push(setInterval(() => {
        this.sweep().catch((error: Error) => this.log.error(`sweep failed (retried next time): ${error.message}`));
      }, this.sweepIntervalMs));
    }
    this.timers.push(setInterval(() => this.ensureWorker().postMessage({ type: 'checkpoint' } satisfies MaintenanceRequest), CHECKPOINT_INTERVAL_MS));
    for (const timer of this.timers) timer.unref();
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
