/**
 * The retention sweeper (LMSP section 10): it deletes what has expired in transactions of at
 * most a thousand rows, pausing between them so that other writers get the database too. The
 * service runs it in its maintenance worker (maintenance.ts), after recovery at startup and
 * every `sweep_interval`; `lmsp gc` runs it directly.
 */
import type { Store } from '../store/index.js';
import { noneSwept, SWEEP_BATCH_ROWS, sweptAnything, type SweepCounts } from '../store/retention.js';
import { nowSeconds, timerDelay } from '../time.js';

/** Free pages given back to the file system in one transaction (4 KiB each). */
const RELEASE_BATCH_PAGES = 1024;

export interface SweepOptions {
  retentionMs: number;
  sweepIntervalMs: number;
}

/** Lets other work in, between two transactions: a turn of the event loop, or a short sleep. */
function pause(ms: number): Promise<void> {
  return new Promise((resolve) => (ms > 0 ? setTimeout(resolve, ms) : setImmediate(resolve)));
}

/** The `finished_at` before which finished tasks expire; null when retention is forever. */
export function retentionCutoff(retentionMs: number, now = nowSeconds()): number | null {
  return retentionMs === Infinity ? null : now - Math.floor(retentionMs / 1000);
}

export class Sweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<SweepCounts> | null = null;

  constructor(private readonly store: Store, private readonly options: SweepOptions,
    private readonly log: (counts: SweepCounts) => void = () => {}, private readonly pauseMs = 0) {}

  /** One full sweep; concurrent calls share the sweep in progress. */
  sweep(): Promise<SweepCounts> {
    this.running ??= this.sweepNow().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  /** What a sweep now would delete, deleting nothing (`lmsp gc --dry-run`). */
  count(): SweepCounts {
    const now = nowSeconds();
    const logs = this.store.retention.countExpired(retentionCutoff(this.options.retentionMs, now));
    return { ...logs, idempotencyKeys: this.store.idempotency.countExpired(now), pairingCodes: this.store.pairingCodes.countExpired(now) };
  }

  private async sweepNow(): Promise<SweepCounts> {
    const counts = noneSwept();
    const now = nowSeconds();
    const cutoff = retentionCutoff(this.options.retentionMs, now);
    for (;;) {
      const started = performance.now();
      const batch = this.store.db.transaction(() => this.store.retention.sweepBatch(cutoff, SWEEP_BATCH_ROWS));
      counts.tasks += batch.tasks;
      counts.events += batch.events;
      if (batch.tasks === 0 && batch.events === 0) break;
      // At most half the time sweeping when pausing at all: a long sweep must not starve requests.
      await pause(this.pauseMs > 0 ? Math.max(this.pauseMs, performance.now() - started) : 0);
    }
    for (;;) {
      const deleted = this.store.db.transaction(() => this.store.idempotency.deleteExpired(now, SWEEP_BATCH_ROWS));
      counts.idempotencyKeys += deleted;
      if (deleted < SWEEP_BATCH_ROWS) break;
      await pause(this.pauseMs);
    }
    counts.pairingCodes = this.store.db.transaction(() => this.store.pairingCodes.deleteExpired(now));
    if (sweptAnything(counts)) {
      // What was deleted goes back to the file system, a few megabytes a transaction: a busy
      // week does not leave the database at its largest for good.
      while (this.store.db.releaseFreePages(RELEASE_BATCH_PAGES) > 0) await pause(this.pauseMs);
      this.log(counts);
    }
    return counts;
  }

  start(): void {
    if (this.options.sweepIntervalMs === Infinity || this.timer) return;
    this.timer = setInterval(() => {
      this.sweep().catch(() => {
        // a failed sweep (database busy or full) is retried at the next interval
      });
    }, timerDelay(this.options.sweepIntervalMs));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
  }
}
