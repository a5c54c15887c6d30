/**
 * Follows a task's event log live (LMSP 7.3). EventSource cannot send an Authorization header,
 * so the stream is read with fetch() and parsed by eventsource-parser. A stream that ends before
 * the terminal event (a restart of the service, a network hiccup) is opened again from the last
 * event seen, as an EventSource would with Last-Event-ID. A stream refused because the service
 * holds as many as it allows (LMSP 16: 429 `too_many_streams`) is asked for again after the
 * `Retry-After` it names, so the page follows the task as soon as a place frees up.
 */
import { createParser } from 'eventsource-parser';
import { ApiError, authorization, checked, type Session } from './session.js';
import { isTerminalEvent, type TaskEvent } from './wire.js';

const RECONNECT_MS = 1000;

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

/** How long a 429 asks to wait (its `Retry-After` in seconds), at least the reconnect pause. */
function retryAfterMs(response: globalThis.Response): number {
  const seconds = Number(response.headers.get('retry-after'));
  return Number.isFinite(seconds) && seconds > 0 ? Math.max(RECONNECT_MS, seconds * 1000) : RECONNECT_MS;
}

/**
 * Calls `onEvents` with the events after `startingAfter`, in order and in batches (one per chunk
 * read), until the terminal event or until `signal` aborts. A stream refused by the limits is
 * tried again, and `onRefused` is told (with the refusal, then with null once a stream is open).
 * Other errors than a dropped connection (404, 403, a revoked token) are thrown.
 */
export async function followTaskEvents(session: Session, taskId: string, startingAfter: number,
  onEvents: (events: TaskEvent[]) => void, signal: AbortSignal,
  onRefused: (refusal: ApiError | null) => void = () => {}): Promise<void> {
  let last = startingAfter;
  let finished = false;
  while (!finished && !signal.aborted) {
    let batch: TaskEvent[] = [];
    const parser = createParser({
      onEvent: (message) => {
        const event = JSON.parse(message.data) as TaskEvent;
        batch.push(event);
        last = event.sequence_number;
        if (isTerminalEvent(event.type)) finished = true;
      },
    });
    let wait = RECONNECT_MS;
    try {
      const answer = await fetch(`v1/tasks/${encodeURIComponent(taskId)}/events?stream=true`, {
        headers: { ...authorization(session), accept: 'text/event-stream', 'last-event-id': String(last) },
        cache: 'no-store',
        credentials: 'omit',
        signal,
      });
      if (answer.status === 429) wait = retryAfterMs(answer);
      const response = await checked(session, answer);
      onRefused(null);
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.feed(value);
        if (batch.length > 0) {
          const events = batch;
          batch = [];
          onEvents(events);
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError && error.status === 429) onRefused(error);
      // A network failure is a TypeError (the service stopped, say): said as such until a stream opens again.
      else if (error instanceof TypeError) onRefused(new ApiError(0, 'connection_lost', 'The connection to the service was lost.', null));
      else throw error; // anything else is an answer
    }
    if (!finished) await pause(wait, signal);
  }
}
