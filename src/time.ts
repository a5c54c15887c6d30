/** Time in the service's units, and the duration syntax of flags and variables (LMSP section 12). */

/** Integer Unix seconds, the unit of every timestamp on the wire (LMSP section 2). */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION_PATTERN = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;

/** A duration in milliseconds; `Infinity` stands for `forever`. */
export type DurationMs = number;

/**
 * Parses `500ms`, `30s`, `10m`, `12h`, `7d`, a bare `0` (no time, in any unit: `--keep-alive 0`
 * as Ollama's `keep_alive: 0`), and `forever` when allowed. Returns null when malformed.
 */
export function parseDuration(text: string, options: { allowForever?: boolean } = {}): DurationMs | null {
  const trimmed = text.trim();
  if (options.allowForever && trimmed === 'forever') return Infinity;
  if (trimmed === '0') return 0;
  const match = DURATION_PATTERN.exec(trimmed);
  if (!match) return null;
  return Math.round(Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]);
}

/** A duration as a user would write it: `7d`, `24h` (a single day reads as the docs write it), `10m`, `500ms`. */
export function formatDuration(ms: DurationMs): string {
  if (ms === Infinity) return 'forever';
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    if (unit === 'd' && ms < 2 * UNIT_MS.d) continue;
    if (ms >= UNIT_MS[unit] && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}

/** The longest delay a Node.js timer keeps (about 24.8 days); a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A delay a timer can hold: a longer one waits about 24.8 days instead, which no idle model or
 * sweep period tells apart from more (a keep-alive of 30d once unloaded the model after 1 ms).
 */
export function timerDelay(ms: number): number {
  return Math.min(ms, MAX_TIMER_MS);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (ms <= 0 || signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
