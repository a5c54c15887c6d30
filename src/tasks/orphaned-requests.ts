/**
 * Requests that died with the process while their tasks went on (LMSP 6, 7.5, 8, 13). A plain or
 * streaming create settles its task when the task finishes: its `Idempotency-Key` gets the final
 * answer, and a `store: false` response or chat completion is deleted with its task and events.
 * After a crash that request is gone: its key's answer points to the task (recovery.ts), and a
 * `store: false` task must still go as soon as it finishes. So at startup the service settles
 * each such task in place of its request, with the same code; its key then holds the answer the
 * create would have given, also once the response is deleted.
 */
import { ServiceError } from '../domain/errors.js';
import type { Task } from '../domain/tasks.js';
import type { StoredAnswer } from '../store/index.js';
import { chatCompletionAnswer, chatCreateAnswer, settleChatCompletionRequest } from './chat-completions.js';
import type { TaskCore } from './core.js';
import { responseView, settleResponseRequest, streamedCreateAnswer } from './responses.js';
import { waitForFinish } from './waiting.js';

/** Per service: the settlement of each task settled in place of its request, by task id. */
const settlements = new WeakMap<TaskCore, Map<string, Promise<StoredAnswer | null>>>();

/** What a plain (neither streamed nor background) create answers once its task has finished. */
function plainAnswerOf(core: Pick<TaskCore, 'store' | 'machine'>, finished: Task): StoredAnswer {
  return finished.completionId !== null ? chatCompletionAnswer(core, finished) : { status: 200, body: responseView(core, finished) };
}

/**
 * What the plain or streaming create of a finished task answered (or would have): its key's
 * final answer. Null when the task has no response or chat completion.
 */
export function finalAnswerOfRequest(core: Pick<TaskCore, 'store' | 'machine'>, finished: Task): StoredAnswer | null {
  if (finished.completionId !== null) {
    const completion = core.store.chatCompletions.getHeader(finished.completionId);
    return completion ? chatCreateAnswer(core, finished, completion) : null;
  }
  const header = finished.responseId === null ? null : core.store.responses.getHeader(finished.responseId);
  if (!header) return null;
  return header.stream ? streamedCreateAnswer(core, finished, header.store) : plainAnswerOf(core, finished);
}

/** Settles one task as its request would have; resolves once the task has finished, with the answer its key got. */
async function settleInPlaceOfRequest(core: TaskCore, task: Task): Promise<StoredAnswer | null> {
  const { store } = core;
  const key = store.idempotency.keyOfTask(task.id);
  const clientGone = () => false;
  if (task.completionId !== null) {
    const completion = store.chatCompletions.getHeader(task.completionId);
    return completion ? (await settleChatCompletionRequest(core, task, completion, key, clientGone)).answer : null;
  }
  const header = task.responseId === null ? null : store.responses.getHeader(task.responseId);
  if (!header) return null;
  const { answer } = await settleResponseRequest(core, task, key, {
    clientGone,
    storeResponse: header.store,
    answerOf: (finished) => (header.stream ? streamedCreateAnswer(core, finished, header.store) : plainAnswerOf(core, finished)),
  });
  return answer;
}

/**
 * A retry of a plain create whose request died with the process while its task went on (its key
 * holds `awaitTaskId`): the answer the create would have given, once the task has finished, as
 * its settlement stored it under the key (a `store: false` task is gone by then); null if the
 * task is gone without one.
 */
async function answerOfSurvivingTask(core: TaskCore, taskId: string): Promise<StoredAnswer | null> {
  const settlement = settlements.get(core)?.get(taskId);
  if (settlement) return settlement;
  // Not settled by this process (it started with the task already finished): the log still holds it.
  const finished = await waitForFinish(core, taskId);
  return finished ? plainAnswerOf(core, finished) : null;
}

/**
 * What a replay of a plain create sends: the stored answer, or for a create whose request died
 * with the process while its task went on, the answer that task gives once finished. `what` names
 * the record in the 404 for a task gone without an answer.
 */
export async function replayedPlainAnswer(core: TaskCore, answer: StoredAnswer, what: string): Promise<StoredAnswer> {
  if (!answer.awaitTaskId) return answer;
  const awaited = await answerOfSurvivingTask(core, answer.awaitTaskId);
  if (!awaited) throw new ServiceError('not_found', `The ${what} this request created has been deleted since.`);
  return awaited;
}

/**
 * Starts settling every unfinished task whose request died with the process: each `store: false`
 * one (deleted once finished), and each whose key points at it (the key gets the final answer, so
 * a replay still has it after the response is deleted, as without a crash). Answers how many.
 */
export function settleOrphanedRequests(core: TaskCore, onError: (taskId: string, error: unknown) => void): number {
  const ids = [...new Set([...core.store.tasks.unfinishedUnstored(), ...core.store.idempotency.pointingAtUnfinished()])];
  const ofCore = new Map<string, Promise<StoredAnswer | null>>();
  settlements.set(core, ofCore);
  for (const id of ids) {
    const task = core.store.tasks.get(id);
    if (!task) continue;
    const settled = settleInPlaceOfRequest(core, task).catch((error: unknown) => {
      onError(id, error);
      return null;
    });
    // Kept (one entry per task found at startup): a retry that read the key's earlier answer
    // may ask after the settlement is done.
    ofCore.set(id, settled);
  }
  return ids.length;
}
