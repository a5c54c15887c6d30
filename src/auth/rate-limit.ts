/** Failed pairing attempts per remote address: at most `limit` a window (LMSP section 4). */

export class FailureRateLimiter {
  private readonly failures = new Map<string, number[]>();

  constructor(private readonly limit = 5, private readonly windowMs = 60_000) {}

  private recent(key: string, now: number): number[] {
    const times = (this.failures.get(key) ?? []).filter((time) => now - time < this.windowMs);
    if (times.length === 0) this.failures.delete(key);
    else this.failures.set(key, times);
    return times;
  }

  /** Seconds until `key` may try again, or 0 when it may try now. */
  retryAfterSeconds(key: string, now = Date.now()): number {
    const times = this.recent(key, now);
    if (times.length < this.limit) return 0;
    return Math.max(1, Math.ceil((times[0]! + this.windowMs - now) / 1000));
  }

  recordFailure(key: string, now = Date.now()): void {
    this.failures.set(key, [...this.recent(key, now), now]);
  }
}
