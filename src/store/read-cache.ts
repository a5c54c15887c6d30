/**
 * A small read-through cache for rows read on every request (a client by token hash, a model by
 * id). Reads in WAL mode under a steady write load cost tens of microseconds each; these rows
 * almost never change.
 *
 * Writes through this connection drop the cache themselves. Other processes (the CLI) may
 * change rows too: SQLite's `data_version` tells when another connection committed, and is
 * checked at most every 25 ms, so such a change is seen within that time. Nothing is cached
 * inside a transaction, which might still roll back.
 */
import type { Sqlite } from './db.js';

const MAX_ENTRIES = 1024;
const VERSION_CHECK_MS = 25;

/** Watches one connection's `data_version`, shared by its caches. */
class VersionWatch {
  private readonly statement;
  private value = -1;
  private checkedAt = -Infinity;

  constructor(db: Sqlite) {
    this.statement = db.prepare('PRAGMA data_version').pluck();
  }

  current(): number {
    const now = performance.now();
    if (now - this.checkedAt >= VERSION_CHECK_MS) {
      this.value = this.statement.get() as number;
      this.checkedAt = now;
    }
    return this.value;
  }
}

const watches = new WeakMap<Sqlite, VersionWatch>();

export class ReadCache<K, V> {
  private readonly entries = new Map<K, V | null>();
  private version = -1;
  private readonly watch: VersionWatch;

  constructor(private readonly db: Sqlite) {
    let watch = watches.get(db);
    if (!watch) {
      watch = new VersionWatch(db);
      watches.set(db, watch);
    }
    this.watch = watch;
  }

  get(key: K, load: () => V | null): V | null {
    if (this.db.inTransaction) return load();
    const version = this.watch.current();
    if (version !== this.version) {
      this.entries.clear();
      this.version = version;
    }
    if (this.entries.has(key)) return this.entries.get(key)!;
    const value = load();
    if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
    this.entries.set(key, value);
    return value;
  }

  /** Called by every write of the cached table. */
  clear(): void {
    this.entries.clear();
  }
}
