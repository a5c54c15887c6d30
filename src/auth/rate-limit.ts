/**
 * Failed pairing attempts per remote address: at most `limit` a window (LMSP section 4). An
 * attempt is counted the moment it begins, before anything is awaited, and forgiven only when it
 * succeeds: however many wrong codes arrive at once, at most `limit` get an answer other than 429.
 */
import { networkInterfaces } from 'node:os';

export interface PairingAttempt {
  /** The attempt paired a client: it does not count against the address. */
  succeeded(): void;
}

function normalized(address: string): string {
  return address.toLowerCase().replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
}

/**
 * The address an attempt counts against. Every loopback address is this machine: a neighbour can
 * send from any of 127.0.0.0/8 (and ::1, or 127.x written as IPv4-mapped IPv6), so they share one
 * count, or each of the 16 million would have 5 attempts of its own. So do the machine's other
 * addresses (`own`: the service's end of the connection, its interfaces), from which a neighbour
 * reaches a service that listens beyond loopback. Other addresses count alone, an IPv4-mapped one
 * as its IPv4 address.
 */
export function attemptKey(address: string, own: Iterable<string> = []): string {
  const ipv4 = normalized(address);
  if (/^127\.\d+\.\d+\.\d+$/.test(ipv4) || ipv4 === '::1' || ipv4 === '0:0:0:0:0:0:0:1') return 'loopback';
  for (const mine of own) if (normalized(mine) === ipv4) return 'loopback';
  return ipv4;
}

/** The addresses of this machine's interfaces. */
export function machineAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((entries) => (entries ?? []).map((entry) => entry.address));
}

/** Addresses kept before the ones whose window has passed are forgotten all at once. */
const SWEEP_AT = 1024;

export class FailureRateLimiter {
  private readonly attempts = new Map<string, number[]>();
  private sweepAt = SWEEP_AT;
  private sweptAt = 0;

  constructor(private readonly limit = 5, private readonly windowMs = 60_000) {}

  /** How many addresses have failed attempts in their window (or not yet forgotten). */
  get addresses(): number {
    return this.attempts.size;
  }

  /**
   * Forgets the addresses with no attempt left in the window, once there are many or a window
   * has passed since the last sweep: bound beyond loopback, every address that tries once would
   * otherwise stay for good.
   */
  private sweep(now: number): void {
    if (this.attempts.size < this.sweepAt && now - this.sweptAt < this.windowMs) return;
    for (const key of [...this.attempts.keys()]) this.recent(key, now);
    this.sweptAt = now;
    this.sweepAt = Math.max(SWEEP_AT, this.attempts.size * 2);
  }

  private recent(key: string, now: number): number[] {
    const times = (this.attempts.get(key) ?? []).filter((time) => now - time < this.windowMs);
    if (times.length === 0) this.attempts.delete(key);
    else this.attempts.set(key, times);
    return times;
  }

  /**
   * Begins an attempt from `key`: the seconds to wait when the address has used up its
   * attempts, else the attempt, counted as failed unless it succeeds.
   */
  begin(key: string, now = Date.now()): { retryAfterSeconds: number } | PairingAttempt {
    this.sweep(now);
    const times = this.recent(key, now);
    if (times.length >= this.limit) {
      return { retryAfterSeconds: Math.max(1, Math.ceil((times[0]! + this.windowMs - now) / 1000)) };
    }
    const stamp = now;
    this.attempts.set(key, [...times, stamp]);
    let settled = false;
    return {
      succeeded: () => {
        if (settled) return;
        settled = true;
        const current = this.attempts.get(key);
        const index = current?.indexOf(stamp) ?? -1;
        if (current && index >= 0) current.splice(index, 1);
      },
    };
  }
}
