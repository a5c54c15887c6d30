/**
 * The random client activity of one round: concurrent workers that create (in every mode, with
 * and without idempotency keys), replay keys, cancel and follow streams until the kill aborts
 * them, recording every acknowledgement in the ledger.
 */
import type { CreateResponseBody, ResponseObject, TaskObject } from '../../src/api/types.js';
import type { RestartPolicy } from '../../src/domain/tasks.js';
import { api, type TestService } from '../../test/helpers/service.js';
import { readSse, type SseFrame } from '../../test/helpers/sse.js';
import type { Ledger, Mode } from './ledger.js';
import { sleep } from './processes.js';
import type { Random } from './random.js';
import type { Info, Violations } from './report.js';
import { bodyOf, SHAPES } from './shapes.js';

export interface RoundContext {
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

export const ACTIONS_CREATING: Record<Action, number> = {
  create_background: 30, create_stream: 10, create_plain: 5, idempotent_burst: 10, replay_key: 8, cancel: 6, follow: 6,
};
/** A round with too long a backlog only cancels and reads, so the backlog shrinks. */
export const ACTIONS_DRAINING: Record<Action, number> = {
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
  const ids = ((await answer.json()) as { data: TaskObject[] }).data.flatMap((task) => (task.response_id ? [task.response_id] : [])).filter((id) => context.ledger.acknowledged.has(id));
  return ids.length > 0 ? context.random.pick(ids) : null;
}

/** One worker: random actions with short pauses until the round is aborted (bounded in count too). */
export async function runWorker(context: RoundContext, weights: Record<Action, number>): Promise<void> {
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
