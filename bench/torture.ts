/**
 * The crash-safety torture harness (`npm run torture`).
 *
 * A bounded loop against the real service, on loopback only: every round starts (or restarts) the
 * built `lmsp serve` on the same data directory, lets a few concurrent client workers do random
 * work for a random short time, then SIGKILLs the service at that moment. While it is down the
 * database is opened read-only and checked; after the restart the API is checked too. A client-side
 * ledger remembers everything the service acknowledged, so that the checks can tell a lost 202 or
 * a second task behind one idempotency key from ordinary crash noise.
 *
 * Every count in the final table must be 0. The same invariants are checked by a short run in
 * test/torture/torture.test.ts; this file's main runs the long version.
 *
 * Also here, because they need the same machinery: the disk-full, read-only-filesystem and
 * corrupt-database checks (`runDiskFullCheck`, `runReadOnlyCheck`, `runCorruptDatabaseCheck`).
 *
 *   node dist/bench/torture.js [--rounds N] [--seed S] [--workers W] [--no-faults] [--keep-data-dir]
 *
 * or LMSP_TORTURE_ROUNDS, LMSP_TORTURE_SEED, LMSP_TORTURE_WORKERS. Exit status 0 when every count
 * is 0, 1 when one is not, 2 when the harness itself failed.
 */
import BetterSqlite3 from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import {
  closeSync, cpSync, existsSync, mkdtempSync, openSync, readFileSync, realpathSync, rmSync, statfsSync, statSync, unlinkSync, writeFileSync, writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { CreateResponseBody, ResponseObject, TaskEvent, TaskObject } from '../src/api/types.js';
import type { RestartPolicy } from '../src/tasks/states.js';
import { runCli } from '../test/helpers/cli.js';
import { makeDataDir } from '../test/helpers/data-dir.js';
import { api, childPids, startService, type StartOptions, type TestService } from '../test/helpers/service.js';
import { readSse, type SseFrame } from '../test/helpers/sse.js';

// ---------------------------------------------------------------------------------------------
// Options, report and the invariants counted
// ---------------------------------------------------------------------------------------------

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
}

/** The invariants; each count is the number of distinct tasks, keys or checks that broke one. */
export const INVARIANTS = {
  missing_acknowledged: 'acknowledged (202, 200 stream start, 200 plain) and then missing (404 / not in the database)',
  event_log_errors: 'event logs with a gap, a duplicate, a number out of order, or last_sequence_number != N',
  terminal_event_errors: 'tasks with more than one terminal event, an event after it, or a final status without one',
  cancelled_not_cancelled: 'tasks cancelled with a 2xx that are or ended in a state other than cancelling/cancelled',
  idempotency_double_tasks: 'idempotency keys whose 2xx answers named more than one response',
  resume_text_mismatch: 'resume tasks (fixed seed) completed with a text other than an uninterrupted run\'s',
  other_text_mismatch: 'other completed tasks (fixed seed) with a text other than an uninterrupted run\'s',
  delta_text_mismatch: 'finished tasks whose delta events do not concatenate to their final text',
  stream_sequence_errors: 'server-sent streams whose ids were not consecutive from where they started',
  server_errors: 'HTTP 5xx answers (other than while the disk is full or read-only)',
  integrity_check_failures: 'PRAGMA integrity_check answers other than ok',
  unfinished_at_end: 'tasks not finished once the service ran undisturbed at the end',
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
}

const TERMINAL_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled']);
const FINAL_STATUSES = new Set(['completed', 'failed', 'cancelled']);
const UNFINISHED_QUERY = 'status=queued,loading,running,cancelling';
const POLICIES: RestartPolicy[] = ['fail', 'retry', 'resume'];
const MAX_EXAMPLES = 5;

/** Distinct offenders per invariant (a task broken in several rounds counts once) and examples. */
class Violations {
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
class Info {
  readonly values = new Map<string, number>();

  bump(name: string, by = 1): void {
    this.values.set(name, (this.values.get(name) ?? 0) + by);
  }

  toObject(): Record<string, number> {
    return Object.fromEntries([...this.values.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([name, value]) => [name, Math.round(value * 10) / 10]));
  }
}

// ---------------------------------------------------------------------------------------------
// Randomness and request shapes
// ---------------------------------------------------------------------------------------------

/** mulberry32: small, fast and seedable, so that a run can be repeated from its printed seed. */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  /** An entry chosen with probability proportional to its weight. */
  weighted<T extends string>(weights: Record<T, number>): T {
    const entries = Object.entries(weights) as Array<[T, number]>;
    let roll = this.next() * entries.reduce((sum, [, weight]) => sum + weight, 0);
    for (const [name, weight] of entries) {
      roll -= weight;
      if (roll < 0) return name;
    }
    return entries.at(-1)![0];
  }
}

/**
 * The request shapes every create uses: a small fixed set, so that the text of an uninterrupted
 * run of each (the reference) costs one plain request. The model is deterministic given the
 * request, so any completed task with the shape's seed must end with exactly that text.
 */
interface Shape {
  input: CreateResponseBody['input'];
  instructions?: string;
  seed: number;
  temperature: number;
  top_p: number;
  max_output_tokens: number;
}

const SHAPES: readonly Shape[] = [
  { input: 'Tell me about lighthouses.', seed: 1, temperature: 1, top_p: 1, max_output_tokens: 5 },
  { input: 'Count to ten, slowly.', seed: 42, temperature: 0.7, top_p: 0.9, max_output_tokens: 40 },
  {
    input: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello! How can I help?' }, { role: 'user', content: 'Go on.' }],
    instructions: 'You are terse.', seed: 7, temperature: 1.3, top_p: 0.95, max_output_tokens: 120,
  },
  { input: 'Greedy, please.', seed: 3, temperature: 0, top_p: 1, max_output_tokens: 200 },
  { input: 'Once upon a time', seed: 99, temperature: 0.9, top_p: 0.5, max_output_tokens: 80 },
  { input: 'Write anything at all.', seed: 123456789, temperature: 2, top_p: 1, max_output_tokens: 150 },
  { input: 'A short one.', instructions: 'Answer in French.', seed: -5, temperature: 1, top_p: 0.8, max_output_tokens: 12 },
  { input: 'The longest shape.', seed: 2024, temperature: 1.1, top_p: 0.97, max_output_tokens: 200 },
];

const MODEL = 'lmsp-tiny';

function bodyOf(shape: Shape, seeded: boolean): CreateResponseBody {
  const body: CreateResponseBody = {
    model: MODEL, input: shape.input, temperature: shape.temperature, top_p: shape.top_p, max_output_tokens: shape.max_output_tokens,
  };
  if (shape.instructions) body.instructions = shape.instructions;
  if (seeded) body.seed = shape.seed;
  return body;
}

/** The text of an uninterrupted run of every shape, from plain requests on a service never killed. */
export async function referenceTexts(log: (line: string) => void = () => {}): Promise<string[]> {
  const service = await startWithRetry({ dataDir: makeDataDir('torture-reference') });
  try {
    const texts: string[] = [];
    for (const shape of SHAPES) {
      const answer = await api(service, '/v1/responses', { method: 'POST', json: bodyOf(shape, true), signal: AbortSignal.timeout(60_000) });
      if (answer.status !== 200) throw new Error(`reference request answered ${answer.status}: ${await answer.text()}`);
      const response = (await answer.json()) as ResponseObject;
      if (response.task.status !== 'completed') throw new Error(`reference response ended ${response.task.status}`);
      texts.push(textOf(response));
    }
    log(`reference texts: ${texts.length} shapes (${texts.map((text) => text.length).join(', ')} characters)`);
    return texts;
  } finally {
    await service.kill();
    rmSync(service.dataDir, { recursive: true, force: true });
  }
}

function textOf(response: ResponseObject): string {
  return response.output[0]?.content[0]?.text ?? '';
}

// ---------------------------------------------------------------------------------------------
// The ledger: what the service acknowledged to clients
// ---------------------------------------------------------------------------------------------

type Mode = 'background' | 'background_stream' | 'stream' | 'plain';

interface Acknowledged {
  responseId: string;
  mode: Mode;
  policy: RestartPolicy;
  shape: number;
  seeded: boolean;
  round: number;
}

interface KeyRecord {
  key: string;
  body: CreateResponseBody;
  mode: Mode;
  policy: RestartPolicy;
  shape: number;
  seeded: boolean;
  round: number;
  /** Distinct response ids named by 2xx answers for this key. */
  ids: Set<string>;
}

class Ledger {
  readonly acknowledged = new Map<string, Acknowledged>();
  /** Response id -> the status of its first 2xx cancel answer. */
  readonly cancelled = new Map<string, number>();
  readonly keys = new Map<string, KeyRecord>();
  /** Acknowledged since the last API check after a restart. */
  fresh: string[] = [];
  /** The most recent acknowledgements, for cancels that may still catch their task running. */
  private recentIds: string[] = [];

  acknowledge(record: Acknowledged): void {
    if (this.acknowledged.has(record.responseId)) return;
    this.acknowledged.set(record.responseId, record);
    this.fresh.push(record.responseId);
    this.recentIds.push(record.responseId);
    if (this.recentIds.length > 40) this.recentIds.shift();
  }

  recent(random: Random): string | null {
    if (this.recentIds.length > 0 && random.chance(0.85)) return random.pick(this.recentIds);
    if (this.acknowledged.size === 0) return null;
    const all = [...this.acknowledged.keys()];
    return random.pick(all);
  }
}

// ---------------------------------------------------------------------------------------------
// Starting and killing the service
// ---------------------------------------------------------------------------------------------

/**
 * startService, tried up to three times: on a shared machine something else may stop a service
 * while it starts, and a crash loop must not give up on the first bad start.
 */
async function startWithRetry(options: StartOptions, previous?: TestService, info?: Info): Promise<TestService> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const started = previous
        ? await previous.restart({ args: options.args ?? [], env: options.env ?? {}, timeoutMs: options.timeoutMs ?? 30_000 })
        : await startService({ timeoutMs: 30_000, ...options });
      return started;
    } catch (error) {
      lastError = error;
      info?.bump('start_retries');
    }
  }
  throw lastError;
}

function processGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/**
 * SIGKILLs the service. Returns a function that waits (bounded) for its runner processes, which
 * end by themselves when their parent's IPC channel closes; one still there after 5 s is counted
 * and killed by its pid (it is ours: started by the service we started).
 */
async function killService(service: TestService, info: Info): Promise<() => Promise<void>> {
  const runners = childPids(service.pid);
  if (service.child.exitCode !== null || service.child.signalCode !== null) info.bump('service_died_before_kill');
  await service.kill();
  return async () => {
    const deadline = Date.now() + 5000;
    while (runners.some((pid) => !processGone(pid)) && Date.now() < deadline) await sleep(20);
    for (const pid of runners.filter((pid) => !processGone(pid))) {
      info.bump('lingering_runner_processes');
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // it ended meanwhile
      }
    }
  };
}

/** SIGKILL, then wait for the runners. */
async function killAndReap(service: TestService, info: Info): Promise<void> {
  await (await killService(service, info))();
}

/** Whether all `promises` settled within `ms` (the timer is cleared, so nothing is left pending). */
async function settledWithin(promises: Array<Promise<unknown>>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((done) => {
    timer = setTimeout(() => done(false), ms);
  });
  try {
    return await Promise.race([Promise.allSettled(promises).then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((done) => {
    const onAbort = () => {
      clearTimeout(timer);
      done();
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      done();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

// ---------------------------------------------------------------------------------------------
// Client activity
// ---------------------------------------------------------------------------------------------

interface RoundContext {
  round: number;
  service: TestService;
  random: Random;
  ledger: Ledger;
  violations: Violations;
  info: Info;
  /** Aborted at the kill: every request of the round stops. */
  signal: AbortSignal;
  /** New tasks this round may still create (shared by the workers). */
  createBudget: { left: number };
}

type Action = 'create_background' | 'create_stream' | 'create_plain' | 'idempotent_burst' | 'replay_key' | 'cancel' | 'follow';

const ACTIONS_CREATING: Record<Action, number> = {
  create_background: 30, create_stream: 10, create_plain: 5, idempotent_burst: 10, replay_key: 8, cancel: 6, follow: 6,
};
/** A round with too long a backlog only cancels and reads, so the backlog shrinks. */
const ACTIONS_DRAINING: Record<Action, number> = {
  create_background: 0, create_stream: 0, create_plain: 0, idempotent_burst: 0, replay_key: 0, cancel: 3, follow: 1,
};

/** The signal of one request: the round's, bounded in time as well. */
function requestSignal(context: RoundContext, timeoutMs = 30_000): AbortSignal {
  return AbortSignal.any([context.signal, AbortSignal.timeout(timeoutMs)]);
}

function responseIdFromLocation(location: string | null): string | null {
  const match = location ? /\/v1\/responses\/(resp_[A-Za-z0-9]+)/.exec(location) : null;
  return match ? match[1]! : null;
}

/** Counts an answer; 5xx is a broken invariant (the disk is neither full nor read-only here). */
function noteStatus(context: RoundContext, action: string, status: number, detail: string): void {
  context.info.bump(`http.${action}.${status}`);
  if (status >= 500) context.violations.add('server_errors', `${action}#${context.round}.${context.info.values.get(`http.${action}.${status}`)}`, `${status} ${detail}`);
}

/** Errors of requests cut by the kill (or by the round's end) are expected; they are counted. */
function noteFailure(context: RoundContext, action: string, error: unknown): void {
  const name = (error as Error)?.name === 'AbortError' || (error as Error)?.name === 'TimeoutError' ? 'aborted' : 'connection';
  context.info.bump(`client.${action}.${name}`);
}

interface CreatePlan {
  body: CreateResponseBody;
  mode: Mode;
  policy: RestartPolicy;
  shape: number;
  seeded: boolean;
}

/** Shapes short enough for a plain create, which waits for the whole text. */
const SHORT_SHAPES = SHAPES.map((shape, index) => ({ shape, index })).filter(({ shape }) => shape.max_output_tokens <= 40).map(({ index }) => index);

function planCreate(random: Random, mode: Mode): CreatePlan {
  const shape = mode === 'plain' ? random.pick(SHORT_SHAPES) : random.int(0, SHAPES.length - 1);
  const seeded = random.chance(0.85);
  // Resume is the policy with the most to get wrong (exact continuation), so it comes most often.
  const policy = random.weighted<RestartPolicy>({ resume: 2, retry: 1, fail: 1 });
  const body: CreateResponseBody = { ...bodyOf(SHAPES[shape]!, seeded), on_restart: policy };
  if (mode === 'background' || mode === 'background_stream') body.background = true;
  if (mode === 'stream' || mode === 'background_stream') body.stream = true;
  return { body, mode, policy, shape, seeded };
}

function takeBudget(context: RoundContext): boolean {
  if (context.createBudget.left <= 0) return false;
  context.createBudget.left -= 1;
  return true;
}

/**
 * One create, in any mode, with or without an Idempotency-Key. Returns the response id that a
 * 2xx answer named (null otherwise), after recording it in the ledger.
 */
async function create(context: RoundContext, plan: CreatePlan, key: string | null, action: string): Promise<string | null> {
  const headers: Record<string, string> = key ? { 'idempotency-key': key } : {};
  const timeout = plan.mode === 'plain' ? 60_000 : 30_000;
  const answer = await api(context.service, '/v1/responses', { method: 'POST', json: plan.body, headers, signal: requestSignal(context, timeout) });
  if (answer.status < 200 || answer.status > 299) {
    noteStatus(context, action, answer.status, await answer.text().catch(() => ''));
    return null;
  }
  noteStatus(context, action, answer.status, '');
  let responseId: string | null;
  if (plan.body.stream) {
    responseId = await readCreateStream(context, answer, action);
  } else if (answer.status === 202) {
    // The Location header arrives with the status line: the acknowledgement is complete then.
    responseId = responseIdFromLocation(answer.headers.get('location'));
    await answer.body?.cancel().catch(() => undefined);
  } else {
    responseId = ((await answer.json()) as ResponseObject).id;
  }
  if (!responseId) return null;
  context.ledger.acknowledge({ responseId, mode: plan.mode, policy: plan.policy, shape: plan.shape, seeded: plan.seeded, round: context.round });
  if (key) context.ledger.keys.get(key)?.ids.add(responseId);
  return responseId;
}

/**
 * Reads a few frames of a streaming create and leaves. The id comes from the Location header of
 * a fresh create, or from `response.created` (a replay has no Location); the frames' ids must be
 * 1, 2, 3... (a replayed stream starts from the beginning too).
 */
async function readCreateStream(context: RoundContext, answer: Response, action: string): Promise<string | null> {
  // A fresh stream's start is an acknowledgement by itself: the task was committed before the
  // status line, so the id counts even if the kill comes before the first frame.
  let responseId = responseIdFromLocation(answer.headers.get('location'));
  const wanted = context.random.int(1, 12);
  const frames: SseFrame[] = [];
  const reader = readSse(answer);
  try {
    for await (const frame of reader) {
      frames.push(frame);
      if (!responseId && frame.event === 'response.created') {
        responseId = ((JSON.parse(frame.data) as { response: ResponseObject }).response).id;
      }
      if (frames.length >= wanted) break;
    }
  } catch (error) {
    noteFailure(context, `${action}.read`, error);
  } finally {
    await reader.return(undefined).catch(() => undefined);
  }
  checkFrames(context, frames, 0, `${action} ${responseId ?? '?'}`);
  return responseId;
}

/** Server-sent frames after `startingAfter` must be numbered startingAfter+1, +2, ... */
function checkFrames(context: RoundContext, frames: SseFrame[], startingAfter: number, what: string): void {
  frames.forEach((frame, index) => {
    if (frame.id !== String(startingAfter + index + 1)) {
      context.violations.add('stream_sequence_errors', `${what}@${context.round}`, `frame ${index} has id ${frame.id}, expected ${startingAfter + index + 1}`);
    }
  });
}

const worker = {
  async create_background(context: RoundContext): Promise<void> {
    if (!takeBudget(context)) return;
    await create(context, planCreate(context.random, 'background'), null, 'create_background');
  },

  async create_stream(context: RoundContext): Promise<void> {
    if (!takeBudget(context)) return;
    const mode: Mode = context.random.chance(0.5) ? 'background_stream' : 'stream';
    await create(context, planCreate(context.random, mode), null, `create_${mode}`);
  },

  async create_plain(context: RoundContext): Promise<void> {
    if (!takeBudget(context)) return;
    await create(context, planCreate(context.random, 'plain'), null, 'create_plain');
  },

  /** The same key and body sent several times at once: at most one task may come of it. */
  async idempotent_burst(context: RoundContext): Promise<void> {
    if (!takeBudget(context)) return;
    const { random, ledger } = context;
    const mode = random.weighted<Mode>({ background: 6, background_stream: 2, plain: 2, stream: 1 });
    const plan = planCreate(random, mode);
    const key = `torture-${context.round}-${random.int(0, 2 ** 30)}`;
    ledger.keys.set(key, { key, body: plan.body, mode, policy: plan.policy, shape: plan.shape, seeded: plan.seeded, round: context.round, ids: new Set() });
    const copies = random.int(1, 6);
    await Promise.all(Array.from({ length: copies }, () => create(context, plan, key, `burst_${mode}`).catch((error: unknown) => noteFailure(context, 'burst', error))));
  },

  /** An earlier key again (often from before a restart): the answer must name the same response. */
  async replay_key(context: RoundContext): Promise<void> {
    const { random, ledger } = context;
    if (ledger.keys.size === 0) return;
    const record = random.pick([...ledger.keys.values()]);
    const plan: CreatePlan = { body: record.body, mode: record.mode, policy: record.policy, shape: record.shape, seeded: record.seeded };
    const copies = random.chance(0.3) ? random.int(2, 4) : 1;
    await Promise.all(Array.from({ length: copies }, () => create(context, plan, record.key, `replay_${record.mode}`).catch((error: unknown) => noteFailure(context, 'replay', error))));
  },

  /** Cancels a known response: half the time one whose task runs now, for the 202 path. */
  async cancel(context: RoundContext): Promise<void> {
    const responseId = (context.random.chance(0.5) ? await someActiveResponse(context) : null) ?? context.ledger.recent(context.random);
    if (!responseId) return;
    const answer = await api(context.service, `/v1/responses/${responseId}/cancel`, { method: 'POST', signal: requestSignal(context) });
    noteStatus(context, 'cancel', answer.status, `${responseId} ${await answer.text().catch(() => '')}`.slice(0, 300));
    if ((answer.status === 200 || answer.status === 202) && !context.ledger.cancelled.has(responseId)) context.ledger.cancelled.set(responseId, answer.status);
  },

  /** Follows a known response's stream from a small sequence number for a few frames. */
  async follow(context: RoundContext): Promise<void> {
    const responseId = context.ledger.recent(context.random);
    if (!responseId) return;
    const startingAfter = context.random.int(0, 3);
    const controller = new AbortController();
    const signal = AbortSignal.any([requestSignal(context, 5000), controller.signal]);
    const answer = await api(context.service, `/v1/responses/${responseId}?stream=true&starting_after=${startingAfter}`, { signal });
    noteStatus(context, 'follow', answer.status, responseId);
    if (answer.status !== 200) {
      await answer.body?.cancel().catch(() => undefined);
      return;
    }
    const frames: SseFrame[] = [];
    const wanted = context.random.int(1, 20);
    const reader = readSse(answer);
    try {
      for await (const frame of reader) {
        frames.push(frame);
        if (frames.length >= wanted) break;
      }
    } catch (error) {
      noteFailure(context, 'follow.read', error);
    } finally {
      controller.abort();
      await reader.return(undefined).catch(() => undefined);
    }
    checkFrames(context, frames, startingAfter, `follow ${responseId}`);
  },
} satisfies Record<Action, (context: RoundContext) => Promise<void>>;

/** A response acknowledged to us whose task is loading or running now, if there is one. */
async function someActiveResponse(context: RoundContext): Promise<string | null> {
  const answer = await api(context.service, '/v1/tasks?status=loading,running&limit=20', { signal: requestSignal(context, 5000) });
  if (answer.status !== 200) {
    noteStatus(context, 'list_active', answer.status, await answer.text().catch(() => ''));
    return null;
  }
  const ids = ((await answer.json()) as { data: TaskObject[] }).data.map((task) => task.response_id).filter((id) => context.ledger.acknowledged.has(id));
  return ids.length > 0 ? context.random.pick(ids) : null;
}

/** One worker: random actions with short pauses until the round is aborted (bounded in count too). */
async function runWorker(context: RoundContext, weights: Record<Action, number>): Promise<void> {
  for (let step = 0; step < 500 && !context.signal.aborted; step++) {
    const action = context.random.weighted(weights);
    try {
      await worker[action](context);
    } catch (error) {
      noteFailure(context, action, error);
    }
    await sleep(context.random.int(5, 80), context.signal);
  }
}

/** How many tasks are unfinished now (bounded by one page: enough to decide on a backlog). */
async function unfinishedCount(service: TestService): Promise<number> {
  const answer = await api(service, `/v1/tasks?${UNFINISHED_QUERY}&limit=1000`, { signal: AbortSignal.timeout(10_000) });
  if (answer.status !== 200) throw new Error(`GET /v1/tasks answered ${answer.status}`);
  return ((await answer.json()) as { data: TaskObject[] }).data.length;
}

// ---------------------------------------------------------------------------------------------
// Checks: offline (the database, read-only, while the service is down) and online (the API)
// ---------------------------------------------------------------------------------------------

interface TaskRow {
  id: string;
  response_id: string;
  status: string;
  on_restart: string;
  last_sequence_number: number;
}

interface EventRow {
  sequence_number: number;
  type: string;
  data: string;
}

/** A finished task as last verified: it must never change again. */
interface Sealed {
  status: string;
  last: number;
}

interface CheckInputs {
  ledger: Ledger;
  violations: Violations;
  references: readonly string[];
  sealed: Map<string, Sealed>;
}

/**
 * The text of a task's current attempt, from its events: the deltas concatenated, starting over
 * at a `response.queued` that began a new attempt (a `retry` restart drops earlier output).
 */
function attemptText(events: ReadonlyArray<{ type: string; delta?: unknown; attempt?: number }>): string {
  let text = '';
  let attempt = 1;
  for (const event of events) {
    if (event.type === 'response.queued' && (event.attempt ?? attempt) > attempt) {
      attempt = event.attempt!;
      text = '';
    } else if (event.type === 'response.output_text.delta') {
      text += String(event.delta ?? '');
    }
  }
  return text;
}

/**
 * The checks of one task's whole log (LMSP 7.3): numbers 1..N with N = last_sequence_number,
 * exactly one terminal event for a finished task and nothing after it; for a finished task the
 * deltas concatenate to its final text, a completed one with a fixed seed has the reference text,
 * and one cancelled with a 2xx is cancelled.
 */
function checkTaskLog(inputs: CheckInputs, task: { id: string; responseId: string; status: string; policy: string; last: number },
  events: ReadonlyArray<{ sequence_number: number; type: string; delta?: unknown; attempt?: number }>, finalText: string | null, where: string): void {
  const { violations, ledger, references } = inputs;
  const numbersOk = events.length === task.last && events.every((event, index) => event.sequence_number === index + 1);
  if (!numbersOk) {
    const numbers = events.map((event) => event.sequence_number);
    violations.add('event_log_errors', task.id, `${where}: ${events.length} events, last_sequence_number ${task.last}, numbers ${numbers.slice(0, 8).join(',')}${numbers.length > 8 ? ',...' : ''}`);
  }
  const terminals = events.filter((event) => TERMINAL_EVENTS.has(event.type));
  const final = FINAL_STATUSES.has(task.status);
  const lastEvent = events.at(-1);
  if (terminals.length > 1 || (terminals.length === 1 && lastEvent && !TERMINAL_EVENTS.has(lastEvent.type)) || (final !== (terminals.length === 1))) {
    violations.add('terminal_event_errors', task.id, `${where}: status ${task.status}, terminal events ${terminals.map((event) => `${event.type}@${event.sequence_number}`).join(' ') || 'none'}, last event ${lastEvent?.type}@${lastEvent?.sequence_number}`);
  }
  const cancelStatus = ledger.cancelled.get(task.responseId);
  if (cancelStatus !== undefined && task.status !== 'cancelled' && task.status !== 'cancelling') {
    violations.add('cancelled_not_cancelled', task.id, `${where}: cancel answered ${cancelStatus}, task is ${task.status}`);
  }
  if (!final) return;
  const text = attemptText(events);
  if (finalText !== null && text !== finalText) {
    violations.add('delta_text_mismatch', task.id, `${where}: deltas give ${text.length} characters, final text has ${finalText.length}`);
  }
  const record = ledger.acknowledged.get(task.responseId);
  if (task.status === 'completed' && record?.seeded && finalText !== null) {
    const expected = references[record.shape]!;
    if (finalText !== expected) {
      const invariant: Invariant = task.policy === 'resume' ? 'resume_text_mismatch' : 'other_text_mismatch';
      violations.add(invariant, task.id, `${where}: shape ${record.shape} (${record.mode}, ${task.policy}) ended with ${JSON.stringify(finalText.slice(0, 60))}..., an uninterrupted run gives ${JSON.stringify(expected.slice(0, 60))}...`);
    }
  }
}

/** Event rows from the database as the checks want them (attempt of `response.queued`, delta text). */
function parseEventRows(rows: EventRow[]): Array<{ sequence_number: number; type: string; delta?: unknown; attempt?: number }> {
  return rows.map((row) => {
    if (row.type === 'response.output_text.delta') return { sequence_number: row.sequence_number, type: row.type, delta: (JSON.parse(row.data) as { delta?: unknown }).delta };
    if (row.type === 'response.queued') {
      return { sequence_number: row.sequence_number, type: row.type, attempt: (JSON.parse(row.data) as { response?: ResponseObject }).response?.task.attempt };
    }
    return { sequence_number: row.sequence_number, type: row.type };
  });
}

/**
 * The checks made while the service is down, on the database opened read-only: integrity, every
 * acknowledged response present, and the logs of every task not yet sealed (plus, when `full`,
 * an aggregate re-check of every task's log). Sealed tasks must be exactly as they were sealed.
 */
function offlineCheck(dataDir: string, inputs: CheckInputs, options: { full: boolean; where: string }): { tasks: number; unfinished: Record<string, number> } {
  const { violations, ledger, sealed } = inputs;
  const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true, fileMustExist: true });
  try {
    const integrity = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
    if (integrity.length !== 1 || integrity[0]!.integrity_check !== 'ok') {
      violations.add('integrity_check_failures', options.where, integrity.slice(0, 3).map((row) => row.integrity_check).join('; '));
    }
    const tasks = db.prepare('SELECT id, response_id, status, on_restart, last_sequence_number FROM tasks').all() as TaskRow[];
    const byResponse = new Map(tasks.map((task) => [task.response_id, task]));
    const responseIds = new Set((db.prepare('SELECT id FROM responses').all() as Array<{ id: string }>).map((row) => row.id));
    for (const responseId of ledger.acknowledged.keys()) {
      if (!byResponse.has(responseId) || !responseIds.has(responseId)) {
        violations.add('missing_acknowledged', responseId, `${options.where}: not in the database (task ${byResponse.has(responseId) ? 'present' : 'absent'}, response ${responseIds.has(responseId) ? 'present' : 'absent'})`);
      }
    }
    const eventsOf = db.prepare<[string], EventRow>('SELECT sequence_number, type, data FROM task_events WHERE task_id = ? ORDER BY sequence_number');
    const outputText = db.prepare<[string], { output_text: string | null }>('SELECT output_text FROM responses WHERE id = ?');
    for (const task of tasks) {
      const seal = sealed.get(task.id);
      if (seal) {
        if (seal.status !== task.status || seal.last !== task.last_sequence_number) {
          violations.add('terminal_event_errors', task.id, `${options.where}: finished as ${seal.status} with ${seal.last} events, now ${task.status} with ${task.last_sequence_number}`);
        }
        continue;
      }
      const events = parseEventRows(eventsOf.all(task.id));
      const final = FINAL_STATUSES.has(task.status);
      const finalText = final ? outputText.get(task.response_id)?.output_text ?? '' : null;
      checkTaskLog(inputs, { id: task.id, responseId: task.response_id, status: task.status, policy: task.on_restart, last: task.last_sequence_number }, events, finalText, options.where);
      if (final) sealed.set(task.id, { status: task.status, last: task.last_sequence_number });
    }
    if (options.full) aggregateLogCheck(db, tasks, violations, options.where);
    // Once a task is sealed it is only ever compared; the cancel ledger must also hold for them.
    for (const [responseId, status] of ledger.cancelled) {
      const task = byResponse.get(responseId);
      if (task && task.status !== 'cancelled' && task.status !== 'cancelling') {
        violations.add('cancelled_not_cancelled', task.id, `${options.where}: cancel answered ${status}, task is ${task.status}`);
      }
    }
    const unfinished: Record<string, number> = {};
    for (const task of tasks.filter((each) => !FINAL_STATUSES.has(each.status))) unfinished[task.status] = (unfinished[task.status] ?? 0) + 1;
    return { tasks: tasks.length, unfinished };
  } finally {
    db.close();
  }
}

/** How often the recovery of LMSP 11.3 left its mark, and how tasks ended (for the summary). */
function recoveryCoverage(dataDir: string, info: Info): void {
  const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true, fileMustExist: true });
  try {
    const events = db.prepare(`SELECT type, count(*) AS n FROM task_events
      WHERE type IN ('response.queued', 'response.resumed', 'response.cancelling', 'response.cancelled', 'response.failed') GROUP BY type`).all() as Array<{ type: string; n: number }>;
    for (const { type, n } of events) info.bump(`events.${type}`, n);
    const endings = db.prepare(`SELECT status || '.' || on_restart || coalesce('.' || error_code, '') AS ending, count(*) AS n FROM tasks GROUP BY ending`).all() as Array<{ ending: string; n: number }>;
    for (const { ending, n } of endings) info.bump(`ended.${ending}`, n);
  } finally {
    db.close();
  }
}

/** Every task's log in one pass, by numbers only: count = max = last_sequence_number, min = 1. */
function aggregateLogCheck(db: BetterSqlite3.Database, tasks: TaskRow[], violations: Violations, where: string): void {
  const terminalList = [...TERMINAL_EVENTS].map((type) => `'${type}'`).join(',');
  const rows = db.prepare(`
    SELECT task_id, count(*) AS n, min(sequence_number) AS lo, max(sequence_number) AS hi,
           sum(type IN (${terminalList})) AS terminals,
           max(CASE WHEN type IN (${terminalList}) THEN sequence_number END) AS last_terminal
    FROM task_events GROUP BY task_id`).all() as Array<{ task_id: string; n: number; lo: number; hi: number; terminals: number; last_terminal: number | null }>;
  const byTask = new Map(rows.map((row) => [row.task_id, row]));
  for (const task of tasks) {
    const row = byTask.get(task.id);
    byTask.delete(task.id);
    const n = row?.n ?? 0;
    if (n !== task.last_sequence_number || (n > 0 && (row!.lo !== 1 || row!.hi !== n))) {
      violations.add('event_log_errors', task.id, `${where} (full scan): ${n} events from ${row?.lo} to ${row?.hi}, last_sequence_number ${task.last_sequence_number}`);
    }
    const final = FINAL_STATUSES.has(task.status);
    const terminals = row?.terminals ?? 0;
    if (terminals > 1 || (terminals === 1 && row!.last_terminal !== row!.hi) || final !== (terminals === 1)) {
      violations.add('terminal_event_errors', task.id, `${where} (full scan): status ${task.status}, ${terminals} terminal events, last at ${row?.last_terminal}, log ends at ${row?.hi}`);
    }
  }
  // Events of a task that does not exist: a log without its task.
  for (const orphan of byTask.keys()) violations.add('event_log_errors', orphan, `${where} (full scan): events without a task`);
}

/** After a restart: every response acknowledged since the last check answers GET (not 404). */
async function onlineCheckFresh(service: TestService, ledger: Ledger, violations: Violations, where: string): Promise<void> {
  const ids = ledger.fresh;
  ledger.fresh = [];
  await inBatches(ids, 8, async (responseId) => {
    const answer = await api(service, `/v1/responses/${responseId}`, { signal: AbortSignal.timeout(10_000) });
    const text = await answer.text();
    if (answer.status === 404) violations.add('missing_acknowledged', responseId, `${where}: GET answered 404`);
    else if (answer.status >= 500) violations.add('server_errors', `GET ${responseId} ${where}`, `${answer.status} ${text.slice(0, 200)}`);
    else if (answer.status !== 200) throw new Error(`GET /v1/responses/${responseId} answered ${answer.status}: ${text}`);
  });
}

async function inBatches<T>(items: readonly T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
  for (let start = 0; start < items.length; start += width) await Promise.all(items.slice(start, start + width).map(work));
}

/** Idempotency: every key's 2xx answers must all name one response. */
function checkKeys(ledger: Ledger, violations: Violations, info: Info): void {
  for (const record of ledger.keys.values()) {
    if (record.ids.size <= 1) continue;
    if (record.mode === 'stream') {
      // A plain streaming create whose client left (or whose service died) releases its key: the
      // documented behaviour (docs/api.md), so a retry runs again. Counted, not a violation here.
      info.bump('stream_keys_run_again');
      continue;
    }
    violations.add('idempotency_double_tasks', record.key, `${record.mode} create answered with ${[...record.ids].join(', ')}`);
  }
}

/** Every task of the service, through the API (admin sees all), oldest first. */
async function allTasks(service: TestService): Promise<TaskObject[]> {
  const tasks: TaskObject[] = [];
  let after: string | null = null;
  for (let page = 0; page < 10_000; page++) {
    const query: string = `/v1/tasks?order=asc&limit=1000${after ? `&after=${after}` : ''}`;
    const answer = await api(service, query, { signal: AbortSignal.timeout(30_000) });
    if (answer.status !== 200) throw new Error(`GET /v1/tasks answered ${answer.status}`);
    const body = (await answer.json()) as { data: TaskObject[]; has_more: boolean; last_id: string | null };
    tasks.push(...body.data);
    if (!body.has_more || !body.last_id) break;
    after = body.last_id;
  }
  return tasks;
}

/** A task's whole log, page by page, through GET /v1/tasks/{id}/events. */
async function eventsViaApi(service: TestService, taskId: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  let after = 0;
  for (let page = 0; page < 1000; page++) {
    const answer = await api(service, `/v1/tasks/${taskId}/events?starting_after=${after}&limit=1000`, { signal: AbortSignal.timeout(30_000) });
    if (answer.status !== 200) throw new Error(`GET events of ${taskId} answered ${answer.status}`);
    const body = (await answer.json()) as { data: TaskEvent[]; has_more: boolean };
    events.push(...body.data);
    if (!body.has_more || body.data.length === 0) break;
    after = body.data.at(-1)!.sequence_number;
  }
  return events;
}

/**
 * The end: every task through the API, black box: its log by pages, its final text from GET
 * /v1/responses/{id}, the ledger's acknowledgements, cancels and keys.
 */
async function finalApiCheck(service: TestService, inputs: CheckInputs): Promise<number> {
  const { violations, ledger } = inputs;
  const tasks = await allTasks(service);
  const byResponse = new Map(tasks.map((task) => [task.response_id, task]));
  await inBatches([...ledger.acknowledged.keys()].filter((id) => !byResponse.has(id)), 8, async (responseId) => {
    const answer = await api(service, `/v1/responses/${responseId}`, { signal: AbortSignal.timeout(10_000) });
    await answer.body?.cancel().catch(() => undefined);
    violations.add('missing_acknowledged', responseId, `end: not listed, GET answered ${answer.status}`);
  });
  await inBatches(tasks, 8, async (task) => {
    const events = (await eventsViaApi(service, task.id)).map((event) => ({
      sequence_number: event.sequence_number,
      type: event.type,
      delta: event.delta,
      attempt: event.type === 'response.queued' ? (event.response as ResponseObject | undefined)?.task.attempt : undefined,
    }));
    let finalText: string | null = null;
    if (FINAL_STATUSES.has(task.status)) {
      const answer = await api(service, `/v1/responses/${task.response_id}`, { signal: AbortSignal.timeout(10_000) });
      finalText = answer.status === 200 ? textOf((await answer.json()) as ResponseObject) : null;
    } else {
      violations.add('unfinished_at_end', task.id, `still ${task.status} at the end`);
    }
    checkTaskLog(inputs, { id: task.id, responseId: task.response_id, status: task.status, policy: task.on_restart, last: task.last_sequence_number }, events, finalText, 'end (API)');
  });
  return tasks.length;
}

/** Adds the time since the last call to `seconds.<name>` (where the rounds spend their time). */
function phaseTimer(info: Info): (name: string) => void {
  let last = performance.now();
  return (name) => {
    const now = performance.now();
    info.bump(`seconds.${name}`, (now - last) / 1000);
    last = now;
  };
}

/** Waits (bounded) until no task is unfinished; false when some still were at the deadline. */
async function drain(service: TestService, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await unfinishedCount(service)) === 0) return true;
    await sleep(250);
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// The crash loop
// ---------------------------------------------------------------------------------------------

/** Service settings for one round: debug delays so tasks are mid-flight (or cancelling) at the kill. */
function roundSettings(random: Random): { env: Record<string, string>; args: string[]; label: string } {
  const tokenDelay = random.pick([0, 2, 5, 10, 20]);
  const cancelDelay = random.pick([0, 0, 0, 0, 200, 1500]);
  const loadDelay = random.pick([0, 0, 0, 0, 0, 300]);
  const parallel = random.pick([1, 2, 3]);
  const env: Record<string, string> = {};
  if (tokenDelay) env.LMSP_DEBUG_TOKEN_DELAY_MS = String(tokenDelay);
  if (cancelDelay) env.LMSP_DEBUG_CANCEL_DELAY_MS = String(cancelDelay);
  if (loadDelay) env.LMSP_DEBUG_LOAD_DELAY_MS = String(loadDelay);
  return { env, args: ['--parallel', String(parallel)], label: `token ${tokenDelay}ms, cancel ${cancelDelay}ms, load ${loadDelay}ms, parallel ${parallel}` };
}

/** Waits (bounded) until some task is running; false when none did in time. */
async function waitForRunning(service: TestService, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !signal.aborted) {
    try {
      const answer = await api(service, '/v1/tasks?status=running&limit=1', { signal: AbortSignal.timeout(5000) });
      if (answer.status === 200 && ((await answer.json()) as { data: TaskObject[] }).data.length > 0) return true;
    } catch {
      return false;
    }
    await sleep(50, signal);
  }
  return false;
}

/** One round's client activity, ended by a SIGKILL at a random moment. */
async function activityAndKill(context: Omit<RoundContext, 'signal' | 'createBudget'>,
  options: Required<Pick<TortureOptions, 'workers' | 'minActivityMs' | 'maxActivityMs' | 'maxBacklog' | 'runningShare'>>): Promise<void> {
  const { random, service, info } = context;
  const controller = new AbortController();
  // Every request of the round listens to this signal (through AbortSignal.any).
  setMaxListeners(10_000, controller.signal);
  let backlog = 0;
  try {
    backlog = await unfinishedCount(service);
  } catch {
    info.bump('backlog_unknown');
  }
  const draining = backlog > options.maxBacklog;
  if (draining) info.bump('rounds_without_creates');
  const roundContext: RoundContext = { ...context, signal: controller.signal, createBudget: { left: draining ? 0 : random.int(2, 10) } };
  const weights = draining ? ACTIONS_DRAINING : ACTIONS_CREATING;
  // Each worker has its own random stream, so its choices do not depend on the others' timing.
  const workers = Array.from({ length: options.workers }, (_, index) =>
    runWorker({ ...roundContext, random: new Random(random.int(0, 2 ** 31) + index) }, weights));
  // Each restart loads the model again (more than a second): without this wait most kills would
  // find every task queued or loading, and few running, mid-output.
  const phase = phaseTimer(info);
  if (random.chance(options.runningShare)) {
    if (await waitForRunning(service, 5000, controller.signal)) info.bump('rounds_killed_while_running');
    phase('wait_for_running');
  }
  await sleep(random.int(options.minActivityMs, options.maxActivityMs));
  phase('activity');
  const reap = await killService(service, info);
  controller.abort();
  phase('kill');
  // Requests cut by the kill fail at once; the bound is for a stuck one.
  if (!(await settledWithin(workers, 15_000))) info.bump('workers_still_busy_after_kill');
  phase('workers_settle');
  await reap();
  phase('runners_exit');
}

export async function runTorture(options: TortureOptions = {}): Promise<TortureReport> {
  const settings = {
    rounds: options.rounds ?? 220,
    workers: options.workers ?? 4,
    minActivityMs: options.minActivityMs ?? 100,
    maxActivityMs: options.maxActivityMs ?? 1500,
    runningShare: options.runningShare ?? 0.6,
    maxBacklog: options.maxBacklog ?? 16,
    fullScanEvery: options.fullScanEvery ?? 10,
    finalTimeoutMs: options.finalTimeoutMs ?? 180_000,
  };
  const seed = options.seed ?? (Date.now() % 2 ** 31);
  const log = options.log ?? (() => {});
  const started = Date.now();
  const random = new Random(seed);
  const ledger = new Ledger();
  const violations = new Violations();
  const info = new Info();
  const sealed = new Map<string, Sealed>();
  log(`torture: ${settings.rounds} rounds, ${settings.workers} workers, seed ${seed}`);
  const references = await referenceTexts(log);
  const inputs: CheckInputs = { ledger, violations, references, sealed };

  const dataDir = makeDataDir('torture');
  let first = roundSettings(random);
  let service = await startWithRetry({ dataDir, env: first.env, args: first.args }, undefined, info);
  let kills = 0;
  let tasksInDatabase = 0;
  try {
    for (let round = 1; round <= settings.rounds; round++) {
      const phase = phaseTimer(info);
      await activityAndKill({ round, service, random, ledger, violations, info }, settings);
      kills += 1;
      phase('round');
      const where = `round ${round}`;
      const offline = offlineCheck(dataDir, inputs, { full: round % settings.fullScanEvery === 0, where });
      tasksInDatabase = offline.tasks;
      // What the kill interrupted: the states recovery will find (LMSP 11.3), summed over rounds.
      for (const [status, count] of Object.entries(offline.unfinished)) info.bump(`at_kill.${status}`, count);
      phase('database_checks');
      first = roundSettings(random);
      service = await startWithRetry({ env: first.env, args: first.args }, service, info);
      phase('restart');
      await onlineCheckFresh(service, ledger, violations, `after ${where}`);
      phase('api_checks');
      if (round % 10 === 0 || round === settings.rounds) {
        const broken = Object.values(violations.counts()).reduce((sum, count) => sum + count, 0);
        log(`round ${round}/${settings.rounds}: ${ledger.acknowledged.size} acknowledged, ${tasksInDatabase} tasks, ${broken} violations, ${Math.round((Date.now() - started) / 1000)} s; next: ${first.label}`);
      }
    }
    // The end: no delays, room to work, and every task must reach a final state.
    await killAndReap(service, info);
    service = await startWithRetry({ env: {}, args: ['--parallel', '3'] }, service, info);
    await onlineCheckFresh(service, ledger, violations, 'end');
    if (!(await drain(service, settings.finalTimeoutMs))) log('some tasks did not finish in time');
    tasksInDatabase = await finalApiCheck(service, inputs);
    checkKeys(ledger, violations, info);
    await killAndReap(service, info);
    offlineCheck(dataDir, inputs, { full: true, where: 'end (database)' });
    recoveryCoverage(dataDir, info);
  } catch (error) {
    log(`torture stopped by an error; data directory kept: ${dataDir}`);
    throw error;
  } finally {
    await service.kill();
  }
  const counts = violations.counts();
  const clean = Object.values(counts).every((count) => count === 0);
  if (clean && !options.keepDataDir) rmSync(dataDir, { recursive: true, force: true });
  else log(`data directory kept: ${dataDir}`);
  return {
    rounds: settings.rounds,
    kills,
    tasksCreated: ledger.acknowledged.size,
    tasksInDatabase,
    elapsedMs: Date.now() - started,
    seed,
    counts,
    info: info.toObject(),
    examples: violations.examples(),
    dataDir,
  };
}

// ---------------------------------------------------------------------------------------------
// Faults: a full disk, a read-only filesystem, a corrupt database
// ---------------------------------------------------------------------------------------------

export interface FaultReport {
  name: string;
  /** How the fault was made (a 16 MB tmpfs, the page cap, an ext4 image...). */
  method: string;
  /** Why (part of) the check could not run; printed, never faked. */
  skipped: string[];
  /** Each must be 0. */
  counts: Record<string, number>;
  notes: string[];
}

function newFault(name: string): FaultReport {
  return { name, method: '', skipped: [], counts: {}, notes: [] };
}

function countFault(report: FaultReport, name: string, by = 1): void {
  report.counts[name] = (report.counts[name] ?? 0) + by;
}

function run(command: string, args: string[]): { ok: boolean; output: string } {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 30_000 });
  return { ok: result.status === 0, output: `${result.stdout ?? ''}${result.stderr ?? ''}${result.error ? String(result.error) : ''}`.trim() };
}

/** `mount -t tmpfs -o size=N tmpfs DIR`; null when it worked, else why not. */
function mountTmpfs(dir: string, size: string): string | null {
  if (process.getuid?.() !== 0) return 'not running as root';
  const result = run('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
  return result.ok ? null : result.output || 'mount failed';
}

/** Unmounts, lazily if the mount is still busy; never throws (it runs in finally blocks). */
function unmount(dir: string): void {
  if (!isMountPoint(dir)) return;
  if (!run('umount', [dir]).ok) run('umount', ['-l', dir]);
}

function mountEntry(dir: string): { source: string; options: string[] } | null {
  const target = realpathSync(dir);
  const lines = readFileSync('/proc/self/mounts', 'utf8').split('\n');
  // The last entry for a mount point is the one in effect.
  for (const line of lines.reverse()) {
    const [source, mountPoint, , options] = line.split(' ');
    if (mountPoint === target && source && options) return { source, options: options.split(',') };
  }
  return null;
}

function isMountPoint(dir: string): boolean {
  try {
    return mountEntry(dir) !== null;
  } catch {
    return false;
  }
}

/** Creates background responses one after another until the service answers 503 (bounded). */
async function fillUntil503(service: TestService, acknowledged: string[], report: FaultReport, maxCreates: number): Promise<number> {
  // Most of each request's weight is metadata (16 values of 500 characters): it is stored with the
  // response and its first event, but costs the model nothing.
  const metadata = Object.fromEntries(Array.from({ length: 16 }, (_, index) => [`filler${index}`, 'x'.repeat(500)]));
  let unavailable = 0;
  for (let index = 0; index < maxCreates && unavailable < 3; index++) {
    const answer = await api(service, '/v1/responses', {
      method: 'POST', signal: AbortSignal.timeout(30_000),
      json: { model: MODEL, input: `fill ${index} ${'y'.repeat(2000)}`, background: true, max_output_tokens: 40, metadata, on_restart: POLICIES[index % 3] },
    });
    const body = (await answer.json()) as ResponseObject & { error?: { code: string; type: string } };
    if (answer.status === 202) {
      acknowledged.push(body.id);
    } else if (answer.status === 503 && body.error?.code === 'storage_unavailable') {
      unavailable += 1;
    } else {
      countFault(report, 'unexpected_answers');
      report.notes.push(`create ${index} answered ${answer.status} ${JSON.stringify(body.error ?? body).slice(0, 200)}`);
    }
  }
  return unavailable;
}

/** GET of every acknowledged response; 404s are lost commits. */
async function countLost(service: TestService, acknowledged: readonly string[]): Promise<number> {
  let lost = 0;
  await inBatches(acknowledged, 8, async (responseId) => {
    const answer = await api(service, `/v1/responses/${responseId}`, { signal: AbortSignal.timeout(10_000) });
    await answer.body?.cancel().catch(() => undefined);
    if (answer.status === 404) lost += 1;
  });
  return lost;
}

/** `PRAGMA integrity_check` on the database opened read-only (the service must be down). */
function integrityCheck(dataDir: string): string {
  const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true, fileMustExist: true });
  try {
    return (db.pragma('integrity_check') as Array<{ integrity_check: string }>).map((row) => row.integrity_check).join('; ');
  } finally {
    db.close();
  }
}

/**
 * A create that must be accepted, tried for a few seconds (the first may still meet a full WAL);
 * the accepted response joins `acknowledged`.
 */
async function createAccepted(service: TestService, acknowledged: string[], attempts = 20): Promise<boolean> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const answer = await api(service, '/v1/responses', { method: 'POST', json: { model: MODEL, input: 'space again', background: true, max_output_tokens: 5 }, signal: AbortSignal.timeout(10_000) });
    const body = (await answer.json()) as ResponseObject;
    if (answer.status === 202) {
      acknowledged.push(body.id);
      return true;
    }
    await sleep(250);
  }
  return false;
}

/**
 * A seeded resume task that is mid-output when a fault comes: whatever the storage did to it, it
 * must end with exactly the text of an uninterrupted run (LMSP 7.5).
 */
const WITNESS: CreateResponseBody = { model: MODEL, input: 'A witness of the fault.', seed: 77, temperature: 1, top_p: 0.9, max_output_tokens: 1000 };

/** Starts the witness and waits (bounded) until it has some output committed. */
async function startWitness(service: TestService): Promise<string> {
  const answer = await api(service, '/v1/responses', { method: 'POST', json: { ...WITNESS, background: true, on_restart: 'resume' }, signal: AbortSignal.timeout(30_000) });
  if (answer.status !== 202) throw new Error(`the witness create answered ${answer.status}: ${await answer.text()}`);
  const responseId = ((await answer.json()) as ResponseObject).id;
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && (await outputTokens(service, responseId)) < 20) await sleep(50);
  return responseId;
}

async function outputTokens(service: TestService, responseId: string): Promise<number> {
  const response = (await (await api(service, `/v1/responses/${responseId}`, { signal: AbortSignal.timeout(10_000) })).json()) as ResponseObject;
  return response.usage?.output_tokens ?? 0;
}

/** Waits (bounded) for a response's task to finish; the response as it is then. */
async function finishedResponse(service: TestService, responseId: string, timeoutMs: number): Promise<ResponseObject> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = (await (await api(service, `/v1/responses/${responseId}`, { signal: AbortSignal.timeout(10_000) })).json()) as ResponseObject;
    if (FINAL_STATUSES.has(response.task.status) || Date.now() > deadline) return response;
    await sleep(100);
  }
}

async function checkWitness(service: TestService, responseId: string, report: FaultReport): Promise<void> {
  const witness = await finishedResponse(service, responseId, 60_000);
  // The uninterrupted run, on the same (now undisturbed) service.
  const answer = await api(service, '/v1/responses', { method: 'POST', json: { ...WITNESS, background: true }, signal: AbortSignal.timeout(30_000) });
  const reference = await finishedResponse(service, ((await answer.json()) as ResponseObject).id, 120_000);
  const resumed = (await eventsViaApi(service, witness.task.id)).filter((event) => event.type === 'response.resumed').length;
  report.notes.push(`the witness task ended ${witness.task.status} after ${resumed} resume(s), attempt ${witness.task.attempt}`);
  if (reference.task.status !== 'completed') {
    countFault(report, 'reference_run_unfinished');
    report.notes.push(`the uninterrupted run of the witness's request was still ${reference.task.status} after 120 s (${reference.usage?.output_tokens ?? 0} tokens)`);
  } else if (witness.task.status !== 'completed') {
    countFault(report, 'witness_not_completed');
  } else if (textOf(witness) !== textOf(reference)) {
    countFault(report, 'witness_text_differs_from_uninterrupted_run');
  }
}

/**
 * After the fault, with the service killed and started again undisturbed: integrity_check ok,
 * nothing acknowledged lost, creates accepted, every task finishes with a log numbered 1..N whose
 * deltas make its final text, and the witness's text is exact.
 */
async function afterFault(service: TestService, acknowledged: readonly string[], report: FaultReport, witnessId: string | null): Promise<TestService> {
  await killAndReap(service, new Info());
  const integrity = integrityCheck(service.dataDir);
  if (integrity !== 'ok') {
    countFault(report, 'integrity_check_failures');
    report.notes.push(`integrity_check: ${integrity}`);
  }
  const restarted = await startWithRetry({ env: {}, args: [] }, service);
  countFault(report, 'lost_after_restart', await countLost(restarted, acknowledged));
  if (!(await createAccepted(restarted, [...acknowledged]))) countFault(report, 'creates_refused_after_restart');
  if (!(await drain(restarted, 60_000))) countFault(report, 'unfinished_after_restart', await unfinishedCount(restarted));
  for (const task of (await allTasks(restarted)).filter((each) => FINAL_STATUSES.has(each.status))) {
    const events = await eventsViaApi(restarted, task.id);
    const numbersOk = events.length === task.last_sequence_number && events.every((event, index) => event.sequence_number === index + 1);
    if (!numbersOk) countFault(report, 'event_log_errors');
    const response = (await (await api(restarted, `/v1/responses/${task.response_id}`, { signal: AbortSignal.timeout(10_000) })).json()) as ResponseObject;
    const deltas = attemptText(events.map((event) => ({ type: event.type, delta: event.delta, attempt: (event.response as ResponseObject | undefined)?.task.attempt })));
    if (deltas !== textOf(response)) countFault(report, 'delta_text_mismatch');
  }
  if (witnessId) await checkWitness(restarted, witnessId, report);
  return restarted;
}

/**
 * A full disk. Preferably real: a 16 MB tmpfs holds the data directory, a filler file takes all
 * but ~2 MB, and background creates go on until the service answers 503 storage_unavailable;
 * then the filler goes and creates must be accepted again. Without mount (not root, or
 * `mount: false`), the service's LMSP_DEBUG_DB_MAX_PAGES caps the database a little above its
 * size instead, and the restart without the cap gives the space back.
 */
export async function runDiskFullCheck(log: (line: string) => void = () => {}, options: { mount?: boolean } = {}): Promise<FaultReport> {
  const report = newFault('disk full');
  const base = mkdtempSync(join(tmpdir(), 'lmsp-diskfull-'));
  const whyNotMounted = options.mount === false ? 'not asked to' : mountTmpfs(base, '16m');
  report.method = whyNotMounted === null ? 'tmpfs of 16 MB, filled by a file' : `LMSP_DEBUG_DB_MAX_PAGES caps the database (no tmpfs: ${whyNotMounted})`;
  log(`disk full: ${report.method}`);
  const dataDir = join(base, 'data');
  let service: TestService | null = null;
  try {
    // Slow tokens, so that tasks (the witness above all) are still writing output when the disk
    // fills up.
    const env = { LMSP_DEBUG_TOKEN_DELAY_MS: '3' };
    service = await startWithRetry({ dataDir, env });
    const filler = join(base, 'filler');
    if (whyNotMounted !== null) {
      await killAndReap(service, new Info());
      const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true });
      const pages = Number(db.pragma('page_count', { simple: true }));
      db.close();
      service = await startWithRetry({ env: { ...env, LMSP_DEBUG_DB_MAX_PAGES: String(pages + 60) } }, service);
    }
    const witnessId = await startWitness(service);
    const acknowledged: string[] = [witnessId];
    if (whyNotMounted === null) writeFiller(filler, statfsSync(base).bavail * statfsSync(base).bsize - 2 * 1024 * 1024);
    const unavailable = await fillUntil503(service, acknowledged, report, 400);
    report.notes.push(`${acknowledged.length - 1} creates accepted, then ${unavailable} answered 503 storage_unavailable`);
    if (unavailable === 0) countFault(report, 'never_storage_unavailable');
    // While full: what was committed is readable, and a 503 left nothing half-written behind.
    const tokensAtFull = await outputTokens(service, witnessId);
    await sleep(1000);
    report.notes.push(`the witness had ${tokensAtFull} tokens when the disk was full, ${await outputTokens(service, witnessId)} a second later`);
    countFault(report, 'lost_while_full', await countLost(service, acknowledged));
    const listed = (await allTasks(service)).map((task) => task.response_id);
    const extra = listed.filter((id) => !acknowledged.includes(id));
    if (extra.length > 0) {
      countFault(report, 'half_written_records', extra.length);
      report.notes.push(`tasks that no 202 announced: ${extra.slice(0, 3).join(', ')}`);
    }
    // Space again: the running service must accept creates at once (tmpfs); with the page cap, a
    // restart without it is the only way to give space back.
    if (whyNotMounted === null) {
      unlinkSync(filler);
      if (!(await createAccepted(service, acknowledged))) countFault(report, 'creates_refused_after_space_freed');
      const stuck = (await drain(service, 15_000)) ? 0 : await unfinishedCount(service);
      report.notes.push(`${stuck} tasks were still unfinished 15 s after space was freed, before any restart`);
    }
    service = await afterFault(service, acknowledged, report, witnessId);
  } finally {
    if (service) await killAndReap(service, new Info());
    unmount(base);
    rmSync(base, { recursive: true, force: true });
  }
  return report;
}

function writeFiller(path: string, bytes: number): void {
  const chunk = Buffer.alloc(1024 * 1024, 0x5a);
  const fd = openSync(path, 'w');
  try {
    for (let written = 0; written < bytes && written < 64 * 1024 * 1024;) {
      const length = Math.min(chunk.length, bytes - written);
      writeSync(fd, chunk, 0, length);
      written += length;
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * A filesystem that turns read-only under the running service. First as asked: a tmpfs remounted
 * with `mount -o remount,ro`; Linux refuses that while a file is open for writing (the database
 * is), so when it does, the same happens for real on an ext4 image mounted with
 * errors=remount-ro, where an error (ext4's trigger_fs_error) makes the kernel turn the
 * filesystem read-only with the files still open. Neither possible (not root...): skipped, said.
 */
export async function runReadOnlyCheck(log: (line: string) => void = () => {}): Promise<FaultReport> {
  const report = newFault('read-only filesystem');
  const tmpfsOutcome = await readOnlyByRemount(report);
  if (tmpfsOutcome === 'done') {
    report.method = 'tmpfs remounted read-only while the service runs';
  } else {
    report.skipped.push(`tmpfs remount,ro while the service runs: ${tmpfsOutcome}`);
    const ext4Outcome = await readOnlyByExt4Error(report);
    if (ext4Outcome === 'done') report.method = 'ext4 image (loop, errors=remount-ro) turned read-only by trigger_fs_error while the service runs';
    else report.skipped.push(`ext4 errors=remount-ro: ${ext4Outcome}`);
  }
  for (const line of report.skipped) log(`read-only: skipped: ${line}`);
  return report;
}

/** While read-only: creates answer 503 storage_unavailable and committed responses stay readable. */
async function probeReadOnly(service: TestService, acknowledged: readonly string[], report: FaultReport): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const answer = await api(service, '/v1/responses', { method: 'POST', json: { model: MODEL, input: 'read-only', background: true, max_output_tokens: 5 }, signal: AbortSignal.timeout(30_000) });
    const body = (await answer.json()) as { error?: { code: string } };
    if (answer.status !== 503 || body.error?.code !== 'storage_unavailable') {
      countFault(report, 'create_not_503_while_read_only');
      report.notes.push(`create while read-only answered ${answer.status} ${JSON.stringify(body).slice(0, 160)}`);
    }
  }
  const lost = await countLost(service, acknowledged).catch(() => -1);
  report.notes.push(lost === -1 ? 'GETs failed while read-only' : `${acknowledged.length - lost}/${acknowledged.length} acknowledged responses readable while read-only`);
  if (lost > 0) countFault(report, 'lost_while_read_only', lost);
}

async function someAcknowledged(service: TestService, count: number, maxTokens: number): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < count; index++) {
    const answer = await api(service, '/v1/responses', { method: 'POST', json: { model: MODEL, input: `before ${index}`, background: true, max_output_tokens: maxTokens, seed: index, on_restart: POLICIES[index % 3] }, signal: AbortSignal.timeout(30_000) });
    if (answer.status !== 202) throw new Error(`create answered ${answer.status}: ${await answer.text()}`);
    ids.push(((await answer.json()) as ResponseObject).id);
  }
  return ids;
}

async function readOnlyByRemount(report: FaultReport): Promise<'done' | string> {
  const base = mkdtempSync(join(tmpdir(), 'lmsp-readonly-'));
  const whyNotMounted = mountTmpfs(base, '64m');
  if (whyNotMounted !== null) {
    rmSync(base, { recursive: true, force: true });
    return `cannot mount a tmpfs (${whyNotMounted})`;
  }
  let service: TestService | null = null;
  try {
    service = await startWithRetry({ dataDir: join(base, 'data'), env: { LMSP_DEBUG_TOKEN_DELAY_MS: '5' } });
    const witnessId = await startWitness(service);
    const acknowledged = [witnessId, ...(await someAcknowledged(service, 3, 5))];
    const remount = run('mount', ['-o', 'remount,ro', base]);
    if (!remount.ok) return `refused by the kernel (${remount.output.split('\n')[0]})`;
    try {
      await probeReadOnly(service, acknowledged, report);
    } finally {
      run('mount', ['-o', 'remount,rw', base]);
    }
    if (!(await createAccepted(service, acknowledged))) countFault(report, 'creates_refused_after_rw');
    service = await afterFault(service, acknowledged, report, witnessId);
    return 'done';
  } finally {
    if (service) await killAndReap(service, new Info());
    unmount(base);
    rmSync(base, { recursive: true, force: true });
  }
}

async function readOnlyByExt4Error(report: FaultReport): Promise<'done' | string> {
  if (process.getuid?.() !== 0) return 'not running as root';
  if (!run('which', ['mkfs.ext4']).ok) return 'mkfs.ext4 is not installed';
  const work = mkdtempSync(join(tmpdir(), 'lmsp-ext4-'));
  const image = join(work, 'fs.img');
  const base = join(work, 'mnt');
  let service: TestService | null = null;
  try {
    writeFileSync(image, '');
    run('truncate', ['-s', '64M', image]);
    const mkfs = run('mkfs.ext4', ['-q', '-F', image]);
    if (!mkfs.ok) return `mkfs.ext4 failed: ${mkfs.output}`;
    run('mkdir', ['-p', base]);
    const mounted = run('mount', ['-o', 'loop,errors=remount-ro', image, base]);
    if (!mounted.ok) return `cannot mount the image: ${mounted.output}`;
    const device = mountEntry(base)?.source ?? '';
    const trigger = `/sys/fs/ext4/${basename(device)}/trigger_fs_error`;
    if (!existsSync(trigger)) return `no ${trigger}`;

    // Tasks mid-flight when the filesystem goes: slow tokens keep them running.
    service = await startWithRetry({ dataDir: join(base, 'data'), env: { LMSP_DEBUG_TOKEN_DELAY_MS: '5' } });
    const witnessId = await startWitness(service);
    const acknowledged = [witnessId, ...(await someAcknowledged(service, 6, 200))];
    await sleep(500);
    writeFileSync(trigger, 'lmsp torture: read-only test\n');
    const readOnly = mountEntry(base)?.options.some((option) => option === 'ro' || option === 'emergency_ro') ?? false;
    if (!readOnly) return 'the filesystem did not turn read-only after trigger_fs_error';
    await probeReadOnly(service, acknowledged, report);
    // Back to read-write: ext4 wants an unmount and a fsck after an error, not a remount.
    await killAndReap(service, new Info());
    unmount(base);
    const fsck = spawnSync('e2fsck', ['-fy', image], { encoding: 'utf8', timeout: 60_000 });
    if ((fsck.status ?? 8) > 1) report.notes.push(`e2fsck exited ${fsck.status}: ${fsck.stdout.slice(-200)}`);
    const again = run('mount', ['-o', 'loop,errors=remount-ro', image, base]);
    if (!again.ok) throw new Error(`cannot mount the image again: ${again.output}`);
    service = await afterFault(service, acknowledged, report, witnessId);
    return 'done';
  } finally {
    if (service) await killAndReap(service, new Info());
    unmount(base);
    rmSync(work, { recursive: true, force: true });
  }
}

function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** A data directory whose database has enough pages for damage in the middle to hit real data. */
async function databaseToCorrupt(): Promise<string> {
  const service = await startWithRetry({ dataDir: makeDataDir('corrupt-source') });
  try {
    await someAcknowledged(service, 40, 200);
    await drain(service, 60_000);
  } finally {
    await service.stop();
  }
  // Everything in the main file: damage to it must not hide behind newer pages in the WAL.
  const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'));
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  return service.dataDir;
}

/**
 * A corrupt database (LMSP 11, project decisions): a few KB overwritten in the middle, and
 * separately the first 100 bytes. `lmsp serve` must exit non-zero soon, say why on stderr, and
 * leave the file's bytes as they were.
 */
export async function runCorruptDatabaseCheck(log: (line: string) => void = () => {}, sourceDataDir?: string): Promise<FaultReport> {
  const report = newFault('corrupt database');
  report.method = 'bytes overwritten with random data while the service is down';
  const source = sourceDataDir ?? (await databaseToCorrupt());
  const random = new Random(7);
  const cases: Array<{ name: string; damage: (path: string) => void }> = [
    {
      name: 'middle',
      damage: (path) => {
        // Three whole pages from a page boundary in the middle: headers and cells both go.
        const pageSize = 4096;
        const offset = Math.floor(statSync(path).size / 2 / pageSize) * pageSize;
        overwrite(path, offset, randomBytes(random, 3 * pageSize));
      },
    },
    { name: 'first 100 bytes', damage: (path) => overwrite(path, 0, randomBytes(random, 100)) },
  ];
  try {
    for (const { name, damage } of cases) {
      const dataDir = makeDataDir(`corrupt-${name}`);
      try {
        cpSync(source, dataDir, { recursive: true });
        rmSync(join(dataDir, 'service.json'), { force: true });
        const path = join(dataDir, 'lmsp.db');
        damage(path);
        const before = sha256File(path);
        const started = Date.now();
        const result = await runCli(['serve', '--data-dir', dataDir, '--port', '0'], { timeoutMs: 30_000 }).catch((error: Error) => ({ code: null, stdout: '', stderr: error.message }));
        const seconds = (Date.now() - started) / 1000;
        const message = result.stderr.trim().replace(/\s*\n\s*/g, ' | ');
        report.notes.push(`${name}: exit ${result.code} after ${seconds.toFixed(1)} s: ${message.slice(0, 200)}`);
        if (result.code === 0 || result.code === null) countFault(report, 'started_or_hung');
        if (seconds > 15) countFault(report, 'slow_exit');
        if (!/corrupt|not an sqlite database|malformed/i.test(result.stderr)) countFault(report, 'unclear_message');
        if (sha256File(path) !== before) countFault(report, 'file_modified');
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
  } finally {
    if (!sourceDataDir) rmSync(source, { recursive: true, force: true });
  }
  for (const note of report.notes) log(`corrupt database: ${note}`);
  return report;
}

function randomBytes(random: Random, length: number): Buffer {
  return Buffer.from(Array.from({ length }, () => random.int(0, 255)));
}

function overwrite(path: string, offset: number, bytes: Buffer): void {
  const fd = openSync(path, 'r+');
  try {
    writeSync(fd, bytes, 0, bytes.length, offset);
  } finally {
    closeSync(fd);
  }
}

// ---------------------------------------------------------------------------------------------
// Printing, and the long run when executed directly
// ---------------------------------------------------------------------------------------------

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
  lines.push('', 'info: ' + Object.entries(report.info).map(([name, value]) => `${name}=${value}`).join(' '));
  return lines.join('\n');
}

export function formatFault(report: FaultReport): string {
  const lines = [`${report.name}: ${report.method || 'not run'}`];
  for (const [name, count] of Object.entries(report.counts)) lines.push(`  ${name.padEnd(36)} ${count}`);
  if (Object.keys(report.counts).length === 0 && report.method) lines.push('  (no failures)');
  for (const line of report.skipped) lines.push(`  SKIPPED: ${line}`);
  for (const note of report.notes) lines.push(`  note: ${note}`);
  return lines.join('\n');
}

export function faultCountsClean(report: FaultReport): boolean {
  return Object.values(report.counts).every((count) => count === 0);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string' }, seed: { type: 'string' }, workers: { type: 'string' },
      'no-faults': { type: 'boolean' }, 'keep-data-dir': { type: 'boolean' },
    },
  });
  const number = (flag: string | undefined, variable: string): number | undefined => {
    const text = flag ?? process.env[variable];
    if (text === undefined) return undefined;
    const value = Number(text);
    if (!Number.isInteger(value)) throw new Error(`${variable} / --${variable.replace(/^LMSP_TORTURE_/, '').toLowerCase()} must be an integer, not ${text}`);
    return value;
  };
  const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
  const report = await runTorture({
    rounds: number(values.rounds, 'LMSP_TORTURE_ROUNDS'),
    seed: number(values.seed, 'LMSP_TORTURE_SEED'),
    workers: number(values.workers, 'LMSP_TORTURE_WORKERS'),
    keepDataDir: values['keep-data-dir'] ?? false,
    log,
  });
  console.log(`\n${formatReport(report)}\n`);
  let clean = Object.values(report.counts).every((count) => count === 0);
  if (!values['no-faults']) {
    for (const check of [runDiskFullCheck, runReadOnlyCheck, runCorruptDatabaseCheck]) {
      const started = Date.now();
      const fault = await check(log);
      console.log(`${formatFault(fault)}\n  (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
      clean &&= faultCountsClean(fault);
    }
  }
  console.log(clean ? 'torture: every count is 0' : 'torture: FAILURES above');
  process.exitCode = clean ? 0 : 1;
}

function executedDirectly(): boolean {
  if (!process.argv[1]) return false;
  try {
    return realpathSync(resolve(process.argv[1])) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (executedDirectly()) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(2);
  });
}
