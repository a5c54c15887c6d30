/**
 * The maintenance worker: a thread with its own database connection that sweeps expired records
 * and checkpoints the WAL, so that neither ever stalls the thread answering requests. Readers
 * never wait for it (WAL); writers wait at most one sweep transaction.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Store } from '../store/index.js';
import { sweptAnything } from '../store/retention.js';
import { Sweeper } from './sweeper.js';
import type { MaintenanceRequest, MaintenanceReply, MaintenanceSettings } from './maintenance.js';

/** Between two sweep transactions, time enough for a waiting writer to take the lock. */
const PAUSE_BETWEEN_BATCHES_MS = 2;

const settings = workerData as MaintenanceSettings;
const store = Store.open(settings.dataDir, { create: false, check: false });
if (settings.dbMaxPages > 0) store.db.sqlite.pragma(`max_page_count = ${settings.dbMaxPages}`);
const sweeper = new Sweeper(store, { retentionMs: settings.retentionMs, sweepIntervalMs: Infinity }, () => {}, PAUSE_BETWEEN_BATCHES_MS);

function checkpoint(): void {
  try {
    store.db.sqlite.pragma('wal_checkpoint(PASSIVE)');
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
