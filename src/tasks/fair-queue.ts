/**
 * Fair scheduling between clients (LMSP section 16): when several clients have queued tasks,
 * the next slot goes to the client that has waited longest for one (round robin), and within a
 * client to its oldest task (FIFO), so one client's long queue cannot starve another's.
 *
 * A client's wait for a slot runs from the last slot it was given; one that has not been given
 * any (since this process started) has waited longest of all. So a client that queues while
 * another holds the only slot gets the next one, even when the other has more tasks queued
 * behind it: the other was served most recently.
 *
 * The clients with queued tasks are kept in memory, in the order they queued; the tasks stay in
 * the database, and each turn reads only the due client's oldest queued task (an indexed probe).
 */
import type { Task } from '../domain/tasks.js';

/** Where the queued tasks are: the generation queue (`store.tasks`) or the pulls' (`store.pulls`). */
export interface QueuedTasks {
  clientsWithQueuedTasks(): string[];
  oldestQueuedOf(clientId: string, claimed: Iterable<string>): Task | null;
}

export class FairQueue {
  /** Clients that may have queued tasks, in the order they joined (a Set keeps insertion order). */
  private readonly line = new Set<string>();
  /** When each client was last given a slot, as a turn number (higher is more recent). */
  private readonly lastServed = new Map<string, number>();
  private turn = 0;

  constructor(private readonly tasks: QueuedTasks) {
    for (const clientId of tasks.clientsWithQueuedTasks()) this.line.add(clientId);
  }

  /** A task of this client was queued: it joins the line unless it is in it already. */
  noteQueued(clientId: string): void {
    this.line.add(clientId);
  }

  /** The next task to start: the oldest queued task of the client that was served least recently. */
  next(claimed: Iterable<string>): Task | null {
    const taken = [...claimed];
    // A stable sort: clients never served keep the order they joined in, ahead of the others.
    const due = [...this.line].sort((a, b) => (this.lastServed.get(a) ?? 0) - (this.lastServed.get(b) ?? 0));
    for (const clientId of due) {
      const task = this.tasks.oldestQueuedOf(clientId, taken);
      if (task) return task;
      this.line.delete(clientId); // nothing queued any more; it joins again when it queues
    }
    return null;
  }

  /** The client got a slot: every client that has waited since goes before it. */
  served(clientId: string): void {
    this.lastServed.set(clientId, ++this.turn);
  }
}
