/**
 * What each client holds open (LMSP sections 4 and 16): its event streams, counted against
 * `--max-streams-per-client` and `--max-streams` (past them 429 `too_many_streams`), and the
 * requests tied to its token (streams, plain and streaming creates), which end when the client
 * is revoked: a stream ends, and a task tied to its connection is cancelled as on a disconnect.
 */
import { ServiceError } from '../domain/errors.js';

export interface StreamLimits {
  perClient: number;
  total: number;
}

/** Seconds a client is told to wait before opening another stream. */
const STREAM_RETRY_AFTER_SECONDS = 1;

export class ConnectionRegistry {
  private readonly streams = new Map<string, number>();
  private totalStreams = 0;
  private readonly bound = new Map<string, Set<() => void>>();
  /**
   * Clients revoked while this process runs. A request that passed the token check just before
   * the revoke committed may bind after it ended the client's requests: it ends at once too.
   */
  private readonly ended = new Set<string>();
  /** Set once the service stops: every request bound from then on ends at once. */
  private stopping = false;
  /**
   * Requests a stop lets finish within its grace period (an embedding: no task holds it, and it
   * is soon done) rather than ending them with the streams and waits.
   */
  private readonly finishOnStop = new Set<() => void>();

  constructor(private readonly limits: StreamLimits) {}

  get openStreams(): number {
    return this.totalStreams;
  }

  /**
   * Counts an event stream of `clientId`, or refuses it past the limits; the returned function
   * gives the place back (once, however often it is called).
   */
  openStream(clientId: string): () => void {
    const held = this.streams.get(clientId) ?? 0;
    if (held >= this.limits.perClient || this.totalStreams >= this.limits.total) {
      const which = held >= this.limits.perClient ? `this client already holds ${held}` : `the service already holds ${this.totalStreams}`;
      throw new ServiceError('too_many_streams', `Too many open event streams: ${which}. Close one and try again.`,
        { headers: { 'retry-after': String(STREAM_RETRY_AFTER_SECONDS) } });
    }
    this.streams.set(clientId, held + 1);
    this.totalStreams += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.totalStreams -= 1;
      const left = (this.streams.get(clientId) ?? 1) - 1;
      if (left > 0) this.streams.set(clientId, left);
      else this.streams.delete(clientId);
    };
  }

  /**
   * Ties a request to its client: `close` runs if the client is revoked meanwhile, and when the
   * service stops unless `finishOnStop`. Returns the untie.
   */
  bind(clientId: string, close: () => void, options: { finishOnStop?: boolean } = {}): () => void {
    if ((this.stopping && !options.finishOnStop) || this.ended.has(clientId)) {
      // Once the caller has set the request up, as when the revoke comes a moment later.
      let untied = false;
      queueMicrotask(() => {
        if (!untied) close();
      });
      return () => {
        untied = true;
      };
    }
    let closers = this.bound.get(clientId);
    if (!closers) {
      closers = new Set();
      this.bound.set(clientId, closers);
    }
    closers.add(close);
    if (options.finishOnStop) this.finishOnStop.add(close);
    return () => {
      closers.delete(close);
      this.finishOnStop.delete(close);
      if (closers.size === 0 && this.bound.get(clientId) === closers) this.bound.delete(clientId);
    };
  }

  /** The client was revoked: everything it holds open ends now. */
  endClient(clientId: string): void {
    this.ended.add(clientId);
    const closers = this.bound.get(clientId);
    this.bound.delete(clientId);
    for (const close of closers ?? []) close();
  }

  /**
   * The service stops: every stream and every request waiting on a task ends now, as on a revoke
   * (a stream's client resumes from its last event at the next start), and so does any bound
   * later; those bound to finish on a stop are left to finish.
   */
  endAll(): void {
    this.stopping = true;
    for (const closers of this.bound.values()) {
      for (const close of closers) {
        if (this.finishOnStop.has(close)) continue;
        closers.delete(close);
        close();
      }
    }
  }
}
