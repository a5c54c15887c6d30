/**
 * Fair scheduling between clients (LMSP section 16): when several clients have queued tasks,
 * the next slot goes to the client that has waited longest for one (round robin), and within a
 * client to its oldest task (FIFO), so one client's long queue cannot starve another's.
 *
 * A client holding fewer slots comes first: one that holds none waits for a slot, one that holds
 * a slot is being served. Among clients holding as many, the one waiting longest comes first: a
 * client's wait starts when it joins the line (queues with nothing queued before) or when it
 * gives a slot back, whichever is later. So a client that queues while another holds the only
 * slot gets it next, however many tasks the other has queued behind; a client that has waited
 * since its last turn ended goes before one that has just arrived.
 *
 * The line is kept in memory; the tasks stay in the database, and each turn reads only the due
 * client's oldest queued task (an indexed probe).
 */
import type { Task } from '../domain/tasks.js';

/** Where the queued tasks are: the generation queue (`store.tasks`) or the pulls' (`store.pulls`). */
export interface QueuedTasks {
  clientsWithQueuedTasks(): string[];
  oldestQueuedOf(clientId: string, claimed: Iterable<string>): Task | null;
}

export class FairQueue {
  /** Clients that may have queued tasks, each with the moment (a turn number) its wait started. */
  private readonly line = new Map<string, number>();
  /** Slots each client holds now. */
  private readonly held = new Map<string, number>();
  private turn = 0;

  constructor(private readonly tasks: QueuedTasks) {
    for (const clientId of tasks.clientsWithQueuedTasks()) this.line.set(clientId, ++this.turn);
  }

  /** A task of this client was queued: it joins the line unless it is in it already. */
  noteQueued(clientId: string): void {
    if (!this.line.has(clientId)) this.line.set(clientId, ++this.turn);
  }

  /** The next task to start: the oldest queued task of the client that is due first. */
  next(claimed: Iterable<string>): Task | null {
    const taken = [...claimed];
    const held = (clientId: string) => this.held.get(clientId) ?? 0;
    const due = [...this.line].sort(([a, since], [b, other]) => held(a) - held(b) || since - other).map(([clientId]) => clientId);
    for (const clientId of due) {
      const task = this.tasks.oldestQueuedOf(clientId, taken);
      if (task) return task;
      this.line.delete(clientId); // nothing queued any more; it joins again when it queues
    }
    return null;
  }

  /** The client was given a slot (a queued task started, or a resumed one was taken up). */
  served(clientId: string): void {
    this.held.set(clientId, (this.held.get(clientId) ?? 0) + 1);
  }

  /** The client gave a slot back: its wait for the next one starts now. */
  released(clientId: string): void {
    const held = (this.held.get(clientId) ?? 1) - 1;
    if (held > 0) this.held.set(clientId, held);
    else this.held.delete(clientId);
    if (this.line.has(clientId)) this.line.set(clientId, ++this.turn);
  }
}
