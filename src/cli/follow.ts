/**
 * Following a task's events from the command line (LMSP 7.3), as a person expects of a long
 * command: a dropped connection (the service restarted, or stopped for a while) is opened again,
 * wherever the service now listens, after the last event seen; a stream refused for a moment
 * (429 `too_many_streams`, LMSP 16) is asked again after a pause. Only when the service stays
 * away does the command end, saying which task goes on without it.
 */
import { TERMINAL_EVENTS } from '../api/events.js';
import { LmspApiError, type LmspClient } from '../api/client.js';
import type { TaskEvent } from '../api/types.js';
import { sleep } from '../time.js';
import { CliError, isConnectionFailure, operatorClient, type CommonOptions } from './context.js';

/** Tries before giving up on a service that does not come back: about 100 s in all. */
const MAX_FAILURES = 60;

/** The error a command ends with when the service is gone for good while it followed `taskId`. */
export function connectionLost(taskId: string, what = 'the task'): CliError {
  return new CliError(`lost the connection to the lmsp service; ${what} ${taskId} goes on in the service by its restart policy: `
    + `follow it with \`lmsp tasks events ${taskId} --follow\``, 1, 'connection_lost');
}

export interface FollowOptions {
  /** Sequence number of the last event already seen. */
  after: number;
  /** Called with each new event, in order. */
  onEvent: (event: TaskEvent) => void;
  /** Told when the connection drops or is refused, with the reason: once an outage, not at every try. */
  onReconnect?: (reason: string, after: number) => void;
  /** What the task is, in the message of a connection lost for good. */
  what?: string;
}

/**
 * Follows a task's events until its terminal event (or, for a log that ends without one, until
 * the task is finished and all its events seen). Returns the client of the service as it was
 * reached last (it may have moved to another address meanwhile) and the last event's number.
 */
export async function followTask(client: LmspClient, options: CommonOptions, taskId: string,
  follow: FollowOptions): Promise<{ client: LmspClient; last: number }> {
  let current = client;
  let last = follow.after;
  // What the person was last told (a refusal or a lost connection), until an event comes through.
  let told: 'refused' | 'lost' | null = null;
  for (let failures = 0; ;) {
    try {
      for await (const event of current.followTaskEvents(taskId, last)) {
        if (event.sequence_number <= last) continue;
        follow.onEvent(event);
        last = event.sequence_number;
        failures = 0;
        told = null;
        if (TERMINAL_EVENTS.has(event.type)) return { client: current, last };
      }
      const task = await current.getTask(taskId);
      if (task.finished_at !== null && task.last_sequence_number <= last) return { client: current, last };
    } catch (error) {
      const refusedForNow = error instanceof LmspApiError && error.status === 429;
      if (!refusedForNow && !isConnectionFailure(error)) throw error;
      failures += 1;
      if (failures > MAX_FAILURES) throw refusedForNow ? error : connectionLost(taskId, follow.what);
      // Once an outage: a service restarting takes many tries, which are not news to the person.
      if (told !== (refusedForNow ? 'refused' : 'lost')) {
        told = refusedForNow ? 'refused' : 'lost';
        follow.onReconnect?.(refusedForNow ? `${error.message} (429 ${error.code})` : 'connection lost', last);
      }
      await sleep(Math.min(2000, 100 * failures));
      if (!refusedForNow) {
        try {
          current = await operatorClient(options);
        } catch {
          // not running (yet): try again
        }
      }
    }
  }
}
