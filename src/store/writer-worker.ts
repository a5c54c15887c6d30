/**
 * The writer thread's side (see writer.ts): its own connection to the database, creates run by
 * `Database.write` (group commit: what arrives in one turn of this thread's event loop shares one
 * BEGIN IMMEDIATE ... COMMIT, each in its own savepoint), every create answered after its commit.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Store } from './index.js';
import { applyTaskCreate } from './task-create.js';
import { failureOf, type WriterReply, type WriterRequest, type WriterSettings } from './writer.js';

const settings = workerData as WriterSettings;
const store = Store.open(settings.dataDir, { create: false, check: false });
// WAL checkpoints belong to the maintenance worker: a commit here never waits for one.
store.db.sqlite.pragma('wal_autocheckpoint = 0');
if (settings.dbMaxPages > 0) store.db.sqlite.pragma(`max_page_count = ${settings.dbMaxPages}`);
const commits: number[] = [];
store.db.onCommit = (seconds) => commits.push(seconds);

function reply(message: WriterReply): void {
  parentPort!.postMessage(message);
}

parentPort!.on('message', (request: WriterRequest) => {
  if (request.type === 'stop') {
    void store.close().then(() => parentPort!.close());
    return;
  }
  void Promise.all(request.batch.map(({ id, command }) => store.db.write(() => applyTaskCreate(store, command)).then(
    (outcome) => ({ id, outcome }),
    (error: unknown) => ({ id, failure: failureOf(error) }),
  ))).then((results) => reply({ type: 'done', results, changes: store.db.totalChanges(), commits: commits.splice(0) }));
});

reply({ type: 'ready' });
