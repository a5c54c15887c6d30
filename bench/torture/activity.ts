/**
 * The random client activity of one round: concurrent workers that create (in every mode, with
 * and without idempotency keys), replay keys, cancel and follow streams until the kill aborts
 * them, recording every acknowledgement in the ledger.
 */
import type { CreateChatCompletionBody } from '../../src/api/chat-completions.js';
import type { CreateResponseBody, ResponseObject, TaskObject } from '../../src/api/types.js';
import type { RestartPolicy } from '../../src/domain/tasks.js';
import { api, type TestService } from '../../test/helpers/service.js';
import { readSse, type SseFrame } from '../../test/helpers/sse.js';
import type { Kind, Ledger, Mode } from './ledger.js';
import { sleep } from './processes.js';
import type { Random } from './random.js';
import type { Info, Violations } from './report.js';
import { bodyOf, CHAT_SHAPES, chatBodyOf, SHAPES } from './shapes.js';

/** Where the round's model pulls come from: a loopback file server (run.ts), slow enough to be cut. */
export interface PullSource {
  url: string;
  digest: string;
}

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
  pullSource: PullSource;
}

type Action = 'create_background' | 'create_stream' | 'create_plain' | 'create_chat' | 'pull' | 'idempotent_burst' | 'replay_key' | 'cancel' | 'follow';

export const ACTIONS_CREATING: Record<Action, number> = {
  create_background: 30, create_stream: 10, create_plain: 5, create_chat: 14, pull: 4, idempotent_burst: 10, replay_key: 8, cancel: 6, follow: 6,
};
/** A round with too long a backlog only cancels and reads, so the backlog shrinks. */
export const ACTIONS_DRAINING: Record<Action, number> = {
  create_background: 0, create_stream: 0, create_plain: 0, create_chat: 0, pull: 0, idempotent_burst: 0, replay_key: 0, cancel: 3, follow: 1,
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
  const where = `${action}#${context.round}.${context.info.values.get(`http.${action}.${status}`)}`;
  if (status >= 500) context.violations.add('server_errors', where, `${status} ${detail}`);
  // Nothing here deletes a response or completion, so a key always has its task or its answer.
  if (status === 404 && action.startsWith('replay')) context.violations.add('replay_not_found', where, detail);
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
  context.ledger.acknowledge({ id: responseId, kind: 'response', store: true, mode: plan.mode, policy: plan.policy, shape: plan.shape, seeded: plan.seeded, round: context.round });
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

/** A chat completion's plan (LMSP 13): plain or streamed, stored or not; never in the background. */
interface ChatPlan {
  body: CreateChatCompletionBody;
  mode: 'plain' | 'stream';
  policy: RestartPolicy;
  shape: number;
  seeded: boolean;
  store: boolean;
}

function planChat(random: Random): ChatPlan {
  const mode = random.chance(0.5) ? 'stream' : 'plain';
  const shape = random.int(0, CHAT_SHAPES.length - 1);
  const seeded = random.chance(0.85);
  const policy = random.weighted<RestartPolicy>({ resume: 2, retry: 1, fail: 1 });
  // Mostly stored, so that the checks can read the final text; the others exercise the deletion
  // of a finished `store: false` completion, crash or not.
  const store = random.chance(0.8);
  const body: CreateChatCompletionBody = { ...chatBodyOf(CHAT_SHAPES[shape]!, seeded), on_restart: policy, store };
  if (mode === 'stream') {
    body.stream = true;
    if (random.chance(0.5)) body.stream_options = { include_usage: true };
  }
  return { body, mode, policy, shape, seeded, store };
}

/**
 * One chat completion, with or without an Idempotency-Key. The status line carries
 * `LMSP-Task-Id`: the task is committed then (a stream's 200 comes before any chunk), so a 2xx is
 * acknowledged by that id. A stream is read to `[DONE]` half the time; otherwise the client
 * leaves early, which cancels the task (docs/api.md). Returns the task id, or null.
 */
async function createChat(context: RoundContext, plan: ChatPlan, key: string | null, action: string): Promise<string | null> {
  const headers: Record<string, string> = key ? { 'idempotency-key': key } : {};
  const answer = await api(context.service, '/v1/chat/completions', { method: 'POST', json: plan.body, headers, signal: requestSignal(context, 60_000) });
  if (answer.status < 200 || answer.status > 299) {
    const text = await answer.text().catch(() => '');
    // A plain create's replay that waited for a task which then failed (its restarts used up)
    // is answered 500 task_failed, as OpenAI answers a failed completion (docs/api.md).
    if (answer.status === 500 && /"code":"task_failed"/.test(text)) context.info.bump(`http.${action}.500_task_failed`);
    else noteStatus(context, action, answer.status, text);
    return null;
  }
  noteStatus(context, action, answer.status, '');
  const taskId = answer.headers.get('lmsp-task-id');
  if (!taskId) {
    context.violations.add('server_errors', `${action}#${context.round}`, `${answer.status} without LMSP-Task-Id`);
    return null;
  }
  context.ledger.acknowledge({ id: taskId, kind: 'chat', store: plan.store, mode: plan.mode, policy: plan.policy, shape: plan.shape, seeded: plan.seeded, round: context.round });
  if (key) context.ledger.keys.get(key)?.ids.add(taskId);
  if (plan.mode === 'plain') {
    await answer.body?.cancel().catch(() => undefined);
    return taskId;
  }
  const toTheEnd = context.random.chance(0.5);
  const wanted = context.random.int(1, 12);
  let frames = 0;
  const reader = readSse(answer);
  try {
    for await (const frame of reader) {
      frames += 1;
      if (frame.data === '[DONE]') context.info.bump('chat_streams_done');
      if (!toTheEnd && frames >= wanted) break;
    }
  } catch (error) {
    noteFailure(context, `${action}.read`, error);
  } finally {
    await reader.return(undefined).catch(() => undefined);
  }
  return taskId;
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

  /**
   * A model pull (LMSP 5.1) of a fresh id, under any restart policy; one in ten names a wrong
   * digest, which must fail it, and one in ten none.
   */
  async pull(context: RoundContext): Promise<void> {
    if (!takeBudget(context)) return;
    const { random, pullSource } = context;
    const modelId = `pull-${context.round}-${random.int(0, 2 ** 30)}`;
    const choice = random.weighted({ right: 8, wrong: 1, none: 1 });
    const body: Record<string, unknown> = { source: pullSource.url, id: modelId, on_restart: random.weighted<RestartPolicy>({ resume: 2, retry: 1, fail: 1 }) };
    if (choice === 'right') body.digest = pullSource.digest;
    if (choice === 'wrong') body.digest = `sha256:${'0'.repeat(64)}`;
    const answer = await api(context.service, '/v1/models/pull', { method: 'POST', json: body, signal: requestSignal(context) });
    const text = await answer.text().catch(() => '');
    noteStatus(context, 'pull', answer.status, text.slice(0, 300));
    if (answer.status !== 202) return;
    const task = JSON.parse(text) as TaskObject;
    context.ledger.acknowledge({
      id: task.id, kind: 'pull', store: true, mode: 'background', policy: body.on_restart as RestartPolicy, shape: -1, seeded: false, round: context.round,
      pull: { modelId, wrongDigest: choice === 'wrong' },
    });
  },

  /** A chat completion; a third of them under an Idempotency-Key, sent up to three times at once. */
  async create_chat(context: RoundContext): Promise<void> {
    if (!takeBudget(context)) return;
    const { random, ledger } = context;
    const plan = planChat(random);
    const action = `chat_${plan.mode}`;
    if (!random.chance(1 / 3)) {
      await createChat(context, plan, null, action);
      return;
    }
    const key = `torture-chat-${context.round}-${random.int(0, 2 ** 30)}`;
    ledger.keys.set(key, { key, kind: 'chat', body: plan.body, mode: plan.mode, policy: plan.policy, shape: plan.shape, seeded: plan.seeded, round: context.round, ids: new Set() });
    await Promise.all(Array.from({ length: random.int(1, 3) }, () => createChat(context, plan, key, `burst_${action}`).catch((error: unknown) => noteFailure(context, 'burst_chat', error))));
  },

  /** The same key and body sent several times at once: at most one task may come of it. */
  async idempotent_burst(context: RoundContext): Promise<void> {
    if (!takeBudget(context)) return;
    const { random, ledger } = context;
    const mode = random.weighted<Mode>({ background: 6, background_stream: 2, plain: 2, stream: 1 });
    const plan = planCreate(random, mode);
    const key = `torture-${context.round}-${random.int(0, 2 ** 30)}`;
    ledger.keys.set(key, { key, kind: 'response', body: plan.body, mode, policy: plan.policy, shape: plan.shape, seeded: plan.seeded, round: context.round, ids: new Set() });
    const copies = random.int(1, 6);
    await Promise.all(Array.from({ length: copies }, () => create(context, plan, key, `burst_${mode}`).catch((error: unknown) => noteFailure(context, 'burst', error))));
  },

  /** An earlier key again (often from before a restart): the answer must name the same response. */
  async replay_key(context: RoundContext): Promise<void> {
    const { random, ledger } = context;
    if (ledger.keys.size === 0) return;
    const record = random.pick([...ledger.keys.values()]);
    const copies = random.chance(0.3) ? random.int(2, 4) : 1;
    const send = (): Promise<string | null> => {
      if (record.kind === 'chat') {
        const body = record.body as CreateChatCompletionBody;
        const plan: ChatPlan = { body, mode: record.mode === 'stream' ? 'stream' : 'plain', policy: record.policy, shape: record.shape, seeded: record.seeded, store: body.store === true };
        return createChat(context, plan, record.key, `replay_chat_${plan.mode}`);
      }
      const plan: CreatePlan = { body: record.body as CreateResponseBody, mode: record.mode, policy: record.policy, shape: record.shape, seeded: record.seeded };
      return create(context, plan, record.key, `replay_${record.mode}`);
    };
    await Promise.all(Array.from({ length: copies }, () => send().catch((error: unknown) => noteFailure(context, 'replay', error))));
  },

  /**
   * Cancels a known response or chat completion (by its task): half the time one whose task runs
   * now, for the 202 path.
   */
  async cancel(context: RoundContext): Promise<void> {
    const id = (context.random.chance(0.5) ? await someActiveResponse(context) : null) ?? context.ledger.recent(context.random);
    if (!id) return;
    const path = kindOf(context, id) === 'response' ? `/v1/responses/${id}/cancel` : `/v1/tasks/${id}/cancel`;
    const answer = await api(context.service, path, { method: 'POST', signal: requestSignal(context) });
    noteStatus(context, 'cancel', answer.status, `${id} ${await answer.text().catch(() => '')}`.slice(0, 300));
    if ((answer.status === 200 || answer.status === 202) && !context.ledger.cancelled.has(id)) context.ledger.cancelled.set(id, answer.status);
  },

  /**
   * Follows a known response's stream (a chat completion's: its task's event stream) from a small
   * sequence number for a few frames.
   */
  async follow(context: RoundContext): Promise<void> {
    const id = context.ledger.recent(context.random);
    if (!id) return;
    const startingAfter = context.random.int(0, 3);
    const controller = new AbortController();
    const signal = AbortSignal.any([requestSignal(context, 5000), controller.signal]);
    const path = kindOf(context, id) === 'response' ? `/v1/responses/${id}?stream=true&starting_after=${startingAfter}` : `/v1/tasks/${id}/events?stream=true&starting_after=${startingAfter}`;
    const answer = await api(context.service, path, { signal });
    noteStatus(context, 'follow', answer.status, id);
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
    checkFrames(context, frames, startingAfter, `follow ${id}`);
  },
} satisfies Record<Action, (context: RoundContext) => Promise<void>>;

function kindOf(context: RoundContext, id: string): Kind {
  return context.ledger.acknowledged.get(id)?.kind ?? 'response';
}

/**
 * A response or chat completion acknowledged to us (its id as in the ledger) whose task is
 * loading or running now, if there is one.
 */
async function someActiveResponse(context: RoundContext): Promise<string | null> {
  const answer = await api(context.service, '/v1/tasks?status=loading,running&limit=20', { signal: requestSignal(context, 5000) });
  if (answer.status !== 200) {
    noteStatus(context, 'list_active', answer.status, await answer.text().catch(() => ''));
    return null;
  }
  const ids = ((await answer.json()) as { data: TaskObject[] }).data
    .map((task) => (task.kind === 'response' ? task.response_id : task.id))
    .filter((id): id is string => id !== null && context.ledger.acknowledged.has(id));
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
