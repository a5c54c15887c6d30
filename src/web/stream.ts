/**
 * Follows a task's event log live (LMSP 7.3). EventSource cannot send an Authorization header,
 * so the stream is read with fetch() and parsed by eventsource-parser. A stream that ends before
 * the terminal event (a restart of the service, a network hiccup) is opened again from the last
 * event seen, as an EventSource would with Last-Event-ID. A stream refused because the service
 * holds as many as it allows (LMSP 16: 429 `too_many_streams`) is asked for again after the
 * `Retry-After` it names, so the page follows the task as soon as a place frees up.
 *
 * A browser opens at most 6 connections to one site over HTTP/1.1, and a stream holds one for as
 * long as its task runs: six task pages open at once would leave none for any other request of
 * the dashboard, whose next tab then waited without a word. So the tabs of the dashboard share a
 * few places for live streams (Web Locks, held while a stream is open), and a stream is given up
 * while its tab is hidden; a page without a place reads the new events every second instead,
 * each read a short request.
 */
import { createParser } from 'eventsource-parser';
import { ApiError, authorization, checked, type Session } from './session.js';
import { isTerminalEvent, type TaskEvent } from './wire.js';

const RECONNECT_MS = 1000;
/** Live streams the tabs of the dashboard hold at once: half the browser's connections to one site. */
const LIVE_STREAMS = 3;
/** How often a page without a live stream reads its task's new events. */
const POLL_MS = 1000;

/** How a page follows its task: not answered yet, through a live stream, or read every second. */
export type FollowMode = 'connecting' | 'live' | 'polled';

/**
 * One of the places for live streams, held until the returned function is called; null when all
 * are taken. Without Web Locks (a page served over plain HTTP to another machine is no secure
 * context) every stream has its place, as the browser's own limit then decides.
 */
async function streamPlace(): Promise<(() => void) | null> {
  const locks = (navigator as Navigator & { locks?: LockManager }).locks;
  if (!locks) return () => {};
  for (let place = 0; place < LIVE_STREAMS; place += 1) {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const granted = await new Promise<boolean>((resolve) => {
      void locks.request(`lmsp-event-stream-${place}`, { ifAvailable: true }, (lock) => {
        resolve(lock !== null);
        return lock === null ? undefined : held;
      });
    });
    if (granted) return release;
  }
  return null;
}

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
 * read, or per read of the list), until the terminal event or until `signal` aborts. A stream
 * refused by the limits is tried again, and `onRefused` is told (with the refusal, then with null
 * once the task is followed again); `onMode` is told how it is followed. Other errors than a
 * dropped connection (404, 403, a revoked token) are thrown.
 */
export async function followTaskEvents(session: Session, taskId: string, startingAfter: number,
  onEvents: (events: TaskEvent[]) => void, signal: AbortSignal,
  onRefused: (refusal: ApiError | null) => void = () => {}, onMode: (mode: FollowMode) => void = () => {}): Promise<void> {
  let last = startingAfter;
  let finished = false;
  const take = (events: TaskEvent[]) => {
    if (events.length === 0) return;
    last = events.at(-1)!.sequence_number;
    if (events.some((event) => isTerminalEvent(event.type))) finished = true;
    onEvents(events);
  };
  const path = `v1/tasks/${encodeURIComponent(taskId)}/events`;

  /** Reads the stream until it ends (or the tab is hidden); returns how long to wait before the next try. */
  const stream = async (): Promise<number> => {
    // Given up while the tab is hidden, so that the tab in sight may have the place.
    const own = new AbortController();
    const stop = () => own.abort();
    const onVisibility = () => {
      if (document.visibilityState === 'hidden') stop();
    };
    signal.addEventListener('abort', stop, { once: true });
    document.addEventListener('visibilitychange', onVisibility);
    let batch: TaskEvent[] = [];
    const parser = createParser({ onEvent: (message) => batch.push(JSON.parse(message.data) as TaskEvent) });
    try {
      const answer = await fetch(`${path}?stream=true`, {
        headers: { ...authorization(session), accept: 'text/event-stream', 'last-event-id': String(last) },
        cache: 'no-store',
        credentials: 'omit',
        signal: own.signal,
      });
      if (answer.status === 429) {
        await checked(session, answer).catch((refusal: unknown) => onRefused(refusal as ApiError));
        return retryAfterMs(answer);
      }
      const response = await checked(session, answer);
      onRefused(null);
      onMode('live');
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.feed(value);
        const events = batch;
        batch = [];
        take(events);
      }
      return RECONNECT_MS;
    } catch (error) {
      // Hidden: followed by reading the list at once.
      if (own.signal.aborted && !signal.aborted) return 0;
      throw error;
    } finally {
      signal.removeEventListener('abort', stop);
      document.removeEventListener('visibilitychange', onVisibility);
    }
  };

  /** Reads the events after the last one seen; returns how long to wait before the next read. */
  const poll = async (): Promise<number> => {
    const answer = await fetch(`${path}?starting_after=${last}&limit=1000`, {
      headers: authorization(session), cache: 'no-store', credentials: 'omit', signal,
    });
    const page = (await (await checked(session, answer)).json()) as { data: TaskEvent[]; has_more: boolean };
    onRefused(null);
    onMode('polled');
    take(page.data);
    return page.has_more ? 0 : POLL_MS;
  };

  onMode('connecting');
  while (!finished && !signal.aborted) {
    let wait = RECONNECT_MS;
    try {
      const release = document.visibilityState === 'hidden' ? null : await streamPlace();
      if (release === null) {
        wait = await poll();
      } else {
        try {
          wait = await stream();
        } finally {
          release();
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      // A network failure is a TypeError (the service stopped, say): said as such until the task is followed again.
      if (error instanceof TypeError) onRefused(new ApiError(0, 'connection_lost', 'The connection to the service was lost.', null));
      else throw error; // anything else is an answer
    }
    if (!finished) await pause(wait, signal);
  }
}
