/**
 * Replays a task's log from a sequence number and follows it live until its terminal event
 * (LMSP 6 and 7.3): the source of every stream the service sends.
 */
import { TERMINAL_EVENTS } from '../api/events.js';
import type { LoggedEvent } from '../domain/tasks.js';
import type { Store } from '../store/index.js';
import type { TaskEventBus } from './event-bus.js';

/**
 * Events read and sent at a time. Between two pages the thread answers other requests, so many
 * replays of long logs at once keep /healthz and everything else answering (LMSP 16).
 */
const PAGE = 200;

/**
 * The replays waiting for their next page. They take turns, one page a turn of the event loop,
 * so that other requests are read between any two pages whatever the number of replays: each
 * waiting on an immediate of its own, every replay would send a page in the same turn, and 500
 * replays at once held the thread for seconds between two reads of the sockets.
 */
const waitingForTurn: Array<() => void> = [];
let turnsScheduled = false;

function nextTurn(): void {
  waitingForTurn.shift()?.();
  if (waitingForTurn.length > 0) setImmediate(nextTurn);
  else turnsScheduled = false;
}

/** Resolves when it is this replay's turn for its next page. */
function yieldToOthers(): Promise<void> {
  return new Promise((resolve) => {
    waitingForTurn.push(resolve);
    if (!turnsScheduled) {
      turnsScheduled = true;
      setImmediate(nextTurn);
    }
  });
}

export type FollowEnd = 'terminal' | 'aborted' | 'gone';

/**
 * Calls `deliver` with each page of events after `afterSequence`, waiting for new commits in
 * between, until the terminal event has been delivered, the signal aborts, or the task is gone.
 */
export async function followTask(store: Store, bus: TaskEventBus, taskId: string, afterSequence: number,
  signal: AbortSignal, deliver: (events: LoggedEvent[]) => Promise<void> | void): Promise<FollowEnd> {
  let wake: (() => void) | null = null;
  let changed = false;
  const unsubscribe = bus.subscribe(taskId, () => {
    changed = true;
    wake?.();
  });
  const onAbort = () => wake?.();
  signal.addEventListener('abort', onAbort);
  let last = afterSequence;
  try {
    for (;;) {
      if (signal.aborted) return 'aborted';
      changed = false;
      const events = store.events.after(taskId, last, PAGE);
      if (events.length > 0) {
        await deliver(events);
        last = events.at(-1)!.sequenceNumber;
        if (events.some((event) => TERMINAL_EVENTS.has(event.type))) return 'terminal';
        if (events.length === PAGE) await yieldToOthers();
        continue;
      }
      const task = store.tasks.get(taskId);
      if (!task) return 'gone';
      // A task whose terminal event is already behind `afterSequence` has nothing more to send.
      if (task.finishedAt !== null && task.lastSequenceNumber <= last) return 'terminal';
      if (changed) continue;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = null;
    }
  } finally {
    unsubscribe();
    signal.removeEventListener('abort', onAbort);
  }
}
