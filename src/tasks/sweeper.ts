/**
 * The retention sweeper (LMSP section 10): after recovery at startup and every
 * `sweep_interval`, it deletes what has expired in transactions of at most a thousand rows,
 * giving the event loop back between them so requests are never blocked for long.
 */
import type { Store } from '../store/index.js';
import { SWEEP_BATCH_ROWS, type SweepCounts } from '../store/retention.js';
import { nowSeconds } from '../time.js';

export interface SweepOptions {
  retentionMs: number;
  sweepIntervalMs: number;
}

const yieldToRequests = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The `finished_at` before which finished tasks expire; null when retention is forever. */
export function retentionCutoff(retentionMs: number, now = nowSeconds()): number | null {
  return retentionMs === Infinity ? null : now - Math.floor(retentionMs / 1000);
}

export class Sweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<SweepCounts> | null = null;

  constructor(private readonly store: Store, private readonly options: SweepOptions,
    private readonly log: (counts: SweepCounts) => void = () => {}) {}

  /** One full sweep; concurrent calls share the sweep in progress. */
  sweep(): Promise<SweepCounts> {
    this.running ??= this.sweepNow().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async sweepNow(): Promise<SweepCounts> {
    const counts: SweepCounts = { tasks: 0, events: 0, idempotencyKeys: 0, pairingCodes: 0 };
    const now = nowSeconds();
    const cutoff = retentionCutoff(this.options.retentionMs, now);
    for (;;) {
      const batch = this.store.db.transaction(() => this.store.retention.sweepBatch(cutoff, SWEEP_BATCH_ROWS));
      counts.tasks += batch.tasks;
      counts.events += batch.events;
      if (batch.tasks === 0 && batch.events === 0) break;
      await yieldToRequests();
    }
    for (;;) {
      const deleted = this.store.db.transaction(() => this.store.idempotency.deleteExpired(now, SWEEP_BATCH_ROWS));
      counts.idempotencyKeys += deleted;
      if (deleted < SWEEP_BATCH_ROWS) break;
      await yieldToRequests();
    }
    counts.pairingCodes = this.store.db.transaction(() => this.store.pairingCodes.deleteExpired(now));
    if (counts.tasks + counts.events + counts.idempotencyKeys + counts.pairingCodes > 0) this.log(counts);
    return counts;
  }

  start(): void {
    if (this.options.sweepIntervalMs === Infinity || this.timer) return;
    this.timer = setInterval(() => {
      this.sweep().catch(() => {
        // a failed sweep (database busy or full) is retried at the next interval
      });
    }, this.options.sweepIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
  }
}
