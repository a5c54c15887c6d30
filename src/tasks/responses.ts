/**
 * The use cases of responses (LMSP section 6): create one in any of its modes, read one as it is
 * now, settle a request that was tied to a connection, delete a finished one.
 */
import type { CreateResponseBody, ResponseObject } from '../api/types.js';
import { sseFrame } from '../api/events.js';
import { liveToolOutputItems } from '../api/response-tool-events.js';
import { finishedToolItems, toResponseObject } from '../api/views.js';
import { canSee, type Client } from '../domain/clients.js';
import { ServiceError } from '../domain/errors.js';
import type { StoredResponse } from '../domain/responses.js';
import { isFinal, responseIdOf, type Task } from '../domain/tasks.js';
import type { IdempotencyKey, Recording, StoredAnswer, WriteContext } from '../store/index.js';
import type { TaskCore } from './core.js';
import { prepareResponse } from './prepare-response.js';
import { hasTools } from './response-kind.js';
import { readToolOutput } from './response-tool-output.js';
import { capOf, tooManyTasks, type TaskLimits } from './limits.js';
import { cancelForDisconnect, waitForFinish, writeWhenStored } from './waiting.js';

export type CreateResponseOutcome = { replay: StoredAnswer } | { response: StoredResponse; task: Task };

export function responseLocation(responseId: string): string {
  return `/v1/responses/${responseId}`;
}

/**
 * What the key of a create records (LMSP 8): a background create its 202, a background stream
 * the task whose events a replay sends again; a plain or streaming create stays in flight until
 * its request is answered (`settleResponseRequest`).
 */
function recordingOf(response: StoredResponse, task: Task): Recording {
  if (response.background && !response.stream) {
    return { answer: { status: 202, headers: { location: responseLocation(response.id) }, body: toResponseObject(response, task, '') }, taskId: task.id };
  }
  if (response.background) return { answer: { status: 200, streamTaskId: task.id }, taskId: task.id };
  return { inFlight: task.id };
}

/**
 * LMSP 11.2: the response, its task, its first event and the idempotency key in one transaction,
 * committed before anything is answered.
 */
export async function createResponse(core: TaskCore, client: Client, body: CreateResponseBody,
  key: IdempotencyKey | null, limits: TaskLimits): Promise<CreateResponseOutcome> {
  const outcome = await core.store.createTask(key, {
    prepare: () => prepareResponse(core, client, body),
    command: ({ response, task }) => {
      const { task: created, events } = core.machine.draftCreate(task, response);
      return {
        record: { kind: 'response', response }, task: created, events, cap: capOf(client, limits), key, recording: recordingOf(response, created),
      };
    },
  });
  if ('refused' in outcome) throw tooManyTasks(outcome.refused.unfinished, limits);
  if ('revoked' in outcome) throw new ServiceError('invalid_token');
  return 'replay' in outcome ? outcome : { response: outcome.prepared.response, task: outcome.task };
}

/** The response and its task, queued, with `response.created`, in the caller's transaction. */
export function insertResponse(core: Pick<TaskCore, 'store' | 'machine'>, context: WriteContext, response: StoredResponse, task: Task): Task {
  core.store.responses.insert(response);
  return core.machine.create(context, task, response);
}

/** The task of a response visible to `client`; another client's looks like one that does not exist. */
export function visibleTaskOfResponse(core: Pick<TaskCore, 'store'>, client: Client, responseId: string): Task {
  const task = core.store.tasks.getByResponse(responseId);
  if (!task || !canSee(client, task.clientId)) throw new ServiceError('not_found', `No response with id '${responseId}'.`, { param: 'id' });
  return task;
}

/** The response as it is now: while unfinished, `output` holds the text generated so far. */
export function responseView(core: Pick<TaskCore, 'store' | 'machine'>, task: Task): ResponseObject {
  const responseId = responseIdOf(task);
  const header = core.store.responses.getHeader(responseId);
  if (!header) throw new ServiceError('not_found', `No response with id '${responseId}'.`);
  const text = task.finishedAt !== null ? core.store.responses.outputText(responseId) ?? '' : core.machine.outputText(task);
  if (!hasTools(header)) return toResponseObject(header, task, text);
  // LMSP 6.2: the message when it has text, then the calls; while running, as the log has them.
  const items = task.finishedAt !== null
    ? finishedToolItems(header, task, text, core.store.responses.outputCalls(responseId) ?? [])
    : liveToolOutputItems(header, readToolOutput(core.store, task), task);
  return toResponseObject(header, task, text, items);
}

/**
 * A plain or streaming create whose request has ended (LMSP 6, 8): a client that left cancels its
 * task and releases its key (as a request that died with the process does); otherwise the key
 * gets the answer. A `store: false` response is deleted once finished. Returns the finished task
 * and, for a client still there, the answer it gets.
 */
export async function settleResponseRequest(core: TaskCore, task: Task, key: IdempotencyKey | null, options: {
  /** Whether the client has left; asked again once the task has finished. */
  clientGone: () => boolean;
  storeResponse: boolean;
  answerOf: (finished: Task) => StoredAnswer;
}): Promise<{ finished: Task | null; answer: StoredAnswer | null }> {
  const { store } = core;
  if (options.clientGone()) await cancelForDisconnect(core, task.id);
  const finished = await waitForFinish(core, task.id);
  const answer = finished && !options.clientGone() ? options.answerOf(finished) : null;
  // Written once the database takes it: a key left in flight would refuse its retries with 409.
  if (key) {
    await writeWhenStored(core, () => {
      if (answer) store.idempotency.complete(key, answer);
      else store.idempotency.release(key);
    });
  }
  if (finished && !options.storeResponse) {
    await writeWhenStored(core, () => store.lifecycle.deleteFinished(finished.id)).catch(() => undefined);
  }
  return { finished, answer };
}

/** Events read at a time when a whole stream is rebuilt from the log. */
const STREAM_PAGE = 500;

/**
 * What the key of a finished streaming create records (LMSP 8: a replay sends the task's events
 * from the start). A stored response replays them from its log; a `store: false` one is deleted
 * now with its log (LMSP 6), so its key keeps the stream's frames themselves.
 */
export function streamedCreateAnswer(core: Pick<TaskCore, 'store'>, finished: Task, storeResponse: boolean): StoredAnswer {
  if (storeResponse) return { status: 200, streamTaskId: finished.id };
  let frames = '';
  for (let after = 0; ;) {
    const events = core.store.events.after(finished.id, after, STREAM_PAGE);
    frames += events.map(sseFrame).join('');
    if (events.length < STREAM_PAGE) break;
    after = events.at(-1)!.sequenceNumber;
  }
  const location: Record<string, string> = finished.responseId === null ? {} : { location: responseLocation(finished.responseId) };
  return { status: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', ...location }, body: frames };
}

/** LMSP 6: DELETE, only once finished; the response, its task and its events go together. */
export function deleteResponse(core: Pick<TaskCore, 'store'>, client: Client, responseId: string): Promise<{ id: string; object: 'response'; deleted: true }> {
  const { store } = core;
  return store.db.write(() => {
    const task = visibleTaskOfResponse(core, client, responseId);
    if (!isFinal(task.status)) throw new ServiceError('response_not_finished', `Response '${responseId}' has not finished; cancel it first.`);
    store.lifecycle.deleteFinished(task.id);
    return { id: responseId, object: 'response', deleted: true };
  });
}
