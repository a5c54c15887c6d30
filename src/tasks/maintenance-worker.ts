/**
 * The maintenance worker: a thread with its own database connection that sweeps expired records
 * and checkpoints the WAL, so that neither ever stalls the thread answering requests. Readers
 * never wait for it (WAL); writers wait at most one sweep transaction, or the restart of a log
 * grown past its limit (checkpoint, below).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { BUSY_TIMEOUT_MS } from '../store/db.js';
import { Store } from '../store/index.js';
import { sweptAnything } from '../store/retention.js';
import { Sweeper } from './sweeper.js';
import type { MaintenanceRequest, MaintenanceReply, MaintenanceSettings } from './maintenance.js';

/** Between two sweep transactions, time enough for a waiting writer to take the lock. */
const PAUSE_BETWEEN_BATCHES_MS = 2;

const settings = workerData as MaintenanceSettings;
const store = Store.open(settings.dataDir, { create: false, check: false });
if (settings.dbMaxPages > 0) store.db.sqlite.pragma(`max_page_count = ${settings.dbMaxPages}`);
const pageSize = store.db.sqlite.pragma('page_size', { simple: true }) as number;
/** Each frame of the write-ahead log is a page and a header of 24 bytes. */
const WAL_FRAME_HEADER_BYTES = 24;
const sweeper = new Sweeper(store, { retentionMs: settings.retentionMs, sweepIntervalMs: Infinity }, () => {}, PAUSE_BETWEEN_BATCHES_MS);

/**
 * How long a restart may keep writers waiting for readers to leave the log. A checkpoint that
 * cannot have them in that time gives up, and the next one tries again.
 */
const RESTART_WAIT_MS = 100;

interface CheckpointResult {
  busy: number;
  /** Frames in the log since it last started over. */
  log: number;
  checkpointed: number;
}

/**
 * Copies the log into the database without making anyone wait. Under a steady stream of writes
 * that is not enough: the log starts over from its beginning only when a write finds every frame
 * copied, which never happens while new frames keep coming, so it would grow by every write of
 * the burst (113 MB for 6,000 creates against a 10 MB database). A log past `walRestartBytes`
 * is therefore restarted: what is left is copied while writers wait (the passive checkpoint just
 * copied the rest) and the next write starts the log over, cut back to `journal_size_limit`.
 */
function checkpoint(): void {
  const sqlite = store.db.sqlite;
  try {
    const [result] = sqlite.pragma('wal_checkpoint(PASSIVE)') as CheckpointResult[];
    if (!result || result.busy !== 0 || result.log * (pageSize + WAL_FRAME_HEADER_BYTES) <= settings.walRestartBytes) return;
    sqlite.pragma(`busy_timeout = ${RESTART_WAIT_MS}`);
    try {
      sqlite.pragma('wal_checkpoint(RESTART)');
    } finally {
      sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  } catch {
    // busy or full: the next checkpoint tries again
  }
}

function reply(message: MaintenanceReply): void {
  parentPort!.postMessage(message);
}

parentPort!.on('message', (request: MaintenanceRequest) => {
  switch (request.type) {
    case 'sweep':
      sweeper.sweep().then(
        (counts) => {
          // What the sweep deleted went to the WAL: checkpoint it now, as writes from the other
          // connection would be.
          if (sweptAnything(counts)) checkpoint();
          reply({ type: 'swept', id: request.id, counts });
        },
        (error: Error & { code?: string }) => reply({ type: 'failed', id: request.id, message: error.message, code: error.code ?? null }),
      );
      return;
    case 'checkpoint':
      checkpoint();
      return;
    case 'stop':
      void sweeper.stop().then(() => {
        store.db.sqlite.close();
        parentPort!.close();
      });
      return;
  }
});
