/**
 * Fair scheduling between clients (LMSP section 16): when several clients have queued tasks,
 * the next slot goes to the client that has waited longest for one (round robin), and within a
 * client to its oldest task (FIFO), so one client's long queue cannot starve another's.
 *
 * The line of clients is kept in memory, in the order they are due; the tasks stay in the
 * database, and each turn reads only the due client's oldest queued task (an indexed probe).
 */
import type { Task } from '../domain/tasks.js';
import type { Store } from '../store/index.js';

export class FairQueue {
  /** Clients that may have queued tasks, the one due next first (a Map keeps insertion order). */
  private readonly line = new Map<string, true>();

  constructor(private readonly store: Store) {
    for (const clientId of store.tasks.clientsWithQueuedTasks()) this.line.set(clientId, true);
  }

  /** A task of this client was queued: it joins the line unless it is in it already. */
  noteQueued(clientId: string): void {
    if (!this.line.has(clientId)) this.line.set(clientId, true);
  }

  /** The next task to start: the oldest queued task of the client due first. */
  next(claimed: Iterable<string>): Task | null {
    const taken = [...claimed];
    for (const clientId of [...this.line.keys()]) {
      const task = this.store.tasks.oldestQueuedOf(clientId, taken);
      if (task) return task;
      this.line.delete(clientId); // nothing queued any more; it joins again when it queues
    }
    return null;
  }

  /** The client got a slot: it goes to the back of the line. */
  served(clientId: string): void {
    this.line.delete(clientId);
    this.line.set(clientId, true);
  }
}
