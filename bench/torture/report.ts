/**
 * What a torture run is asked to do and what it reports: the options, the invariants whose counts
 * must all be 0, the tallies of broken invariants (Violations) and of what happened (Info), and
 * the printed table.
 */


export interface TortureOptions {
  /** Rounds, each ending with one SIGKILL (default 220: about 12 minutes on two cores). */
  rounds?: number;
  /** Concurrent client workers per round (default 4). */
  workers?: number;
  /** Seed of the pseudo-random choices, so a failing run can be replayed (default: time based). */
  seed?: number;
  /**
   * The kill comes at a random moment between these (default 100-1500 ms), measured from the
   * service being ready or, in most rounds, from the first task running (the model loads first).
   */
  minActivityMs?: number;
  maxActivityMs?: number;
  /** The share of rounds that wait for a running task before the random moment (default 0.6). */
  runningShare?: number;
  /** The share of rounds in which a runner process is killed too, earlier in the round (default 0.3). */
  runnerKillShare?: number;
  /** No new tasks in a round that starts with more unfinished tasks than this (default 16). */
  maxBacklog?: number;
  /** Every this many rounds, the event logs of all tasks are re-scanned, not only the new ones. */
  fullScanEvery?: number;
  /** How long the end may wait for every task to finish (default 180 s). */
  finalTimeoutMs?: number;
  /** Where progress lines go (default: nowhere). */
  log?: (line: string) => void;
  /** Keep the data directory even when every count is 0. */
  keepDataDir?: boolean;
  /** Run a hostile neighbour beside the workers (neighbour.ts): floods and malformed requests. */
  neighbour?: boolean;
}

/** The invariants; each count is the number of distinct tasks, keys or checks that broke one. */
export const INVARIANTS = {
  missing_acknowledged: 'acknowledged (202, 200 stream start, 200 plain) and then missing (404 / not in the database)',
  event_log_errors: 'event logs with a gap, a duplicate, a number out of order, or last_sequence_number != N',
  terminal_event_errors: 'tasks with more than one terminal event, an event after it, or a final status without one',
  cancelled_not_cancelled: 'tasks cancelled with a 2xx that are or ended in a state other than cancelling/cancelled',
  idempotency_double_tasks: 'idempotency keys whose 2xx answers named more than one response',
  replay_not_found: 'replays of an Idempotency-Key answered 404 (nothing deletes a response or completion here)',
  resume_text_mismatch: 'resume tasks (fixed seed) completed with a text other than an uninterrupted run\'s',
  other_text_mismatch: 'other completed tasks (fixed seed) with a text other than an uninterrupted run\'s',
  delta_text_mismatch: 'finished tasks whose delta events do not concatenate to their final text',
  stream_sequence_errors: 'server-sent streams whose ids were not consecutive from where they started',
  server_errors: 'HTTP 5xx answers (other than while the disk is full or read-only)',
  integrity_check_failures: 'PRAGMA integrity_check answers other than ok',
  unfinished_at_end: 'tasks not finished once the service ran undisturbed at the end',
  pull_errors: 'model pulls that completed without their model (digest and file), registered a model or left a partial file when they did not complete, or completed with a wrong digest',
} as const;
export type Invariant = keyof typeof INVARIANTS;
export type Counts = Record<Invariant, number>;

export interface TortureReport {
  rounds: number;
  kills: number;
  tasksCreated: number;
  tasksInDatabase: number;
  elapsedMs: number;
  seed: number;
  counts: Counts;
  /** Counters that describe the run (statuses seen, connection errors...), not failures. */
  info: Record<string, number>;
  /** A few descriptions per broken invariant, to start an investigation from. */
  examples: Partial<Record<Invariant, string[]>>;
  dataDir: string;
  /** With a neighbour: /healthz latency while it flooded the service (ms), and how many probes. */
  health: { p50: number | null; p99: number | null; samples: number } | null;
}

/** LMSP 16: /healthz must keep answering quickly under a hostile neighbour's floods. */
export const HEALTH_P99_TARGET_MS = 250;

const MAX_EXAMPLES = 5;

/** Distinct offenders per invariant (a task broken in several rounds counts once) and examples. */
export class Violations {
  private readonly offenders = new Map<Invariant, Set<string>>();
  private readonly samples = new Map<Invariant, string[]>();

  add(invariant: Invariant, subject: string, detail: string): void {
    const set = this.offenders.get(invariant) ?? new Set<string>();
    this.offenders.set(invariant, set);
    if (set.has(subject)) return;
    set.add(subject);
    const samples = this.samples.get(invariant) ?? [];
    this.samples.set(invariant, samples);
    if (samples.length < MAX_EXAMPLES) samples.push(`${subject}: ${detail}`);
  }

  counts(): Counts {
    const counts = {} as Counts;
    for (const invariant of Object.keys(INVARIANTS) as Invariant[]) counts[invariant] = this.offenders.get(invariant)?.size ?? 0;
    return counts;
  }

  examples(): Partial<Record<Invariant, string[]>> {
    return Object.fromEntries(this.samples);
  }
}

/** Descriptive counters (how often each answer was seen...). */
export class Info {
  readonly values = new Map<string, number>();

  bump(name: string, by = 1): void {
    this.values.set(name, (this.values.get(name) ?? 0) + by);
  }

  toObject(): Record<string, number> {
    return Object.fromEntries([...this.values.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([name, value]) => [name, Math.round(value * 10) / 10]));
  }
}

export function formatReport(report: TortureReport): string {
  const width = Math.max(...Object.keys(INVARIANTS).map((name) => name.length));
  const lines = [
    `rounds ${report.rounds}, kills ${report.kills}, tasks acknowledged ${report.tasksCreated}, tasks in the database ${report.tasksInDatabase}, elapsed ${(report.elapsedMs / 1000).toFixed(1)} s, seed ${report.seed}`,
    '',
    `${'invariant'.padEnd(width)}  count`,
    `${'-'.repeat(width)}  -----`,
    ...(Object.keys(INVARIANTS) as Invariant[]).map((name) => `${name.padEnd(width)}  ${String(report.counts[name]).padStart(5)}`),
  ];
  for (const [name, examples] of Object.entries(report.examples)) {
    lines.push('', `${name}: ${INVARIANTS[name as Invariant]}`, ...(examples ?? []).map((example) => `  ${example}`));
  }
  if (report.health) {
    const { p50, p99, samples } = report.health;
    lines.push('', `/healthz under the neighbour: p50 ${p50?.toFixed(1)} ms, p99 ${p99?.toFixed(1)} ms over ${samples} probes (target p99 < ${HEALTH_P99_TARGET_MS} ms: ${p99 !== null && p99 < HEALTH_P99_TARGET_MS ? 'met' : 'NOT met'})`);
  }
  lines.push('', 'info: ' + Object.entries(report.info).map(([name, value]) => `${name}=${value}`).join(' '));
  return lines.join('\n');
}
