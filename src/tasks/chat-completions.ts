/**
 * The use cases of Chat Completions (LMSP 13): create one (plain or streamed), read it as it is
 * now, settle a request that was tied to its connection, and the stored completions: list, get,
 * messages, update metadata, delete.
 */
import { chatStreamFrame } from '../api/chat-completion-events.js';
import {
  toChatCompletionObject, toChatMessageObjects, type ChatCompletionDeleted, type ChatCompletionObject, type ChatMessageObject,
  type CreateChatCompletionBody,
} from '../api/chat-completions.js';
import type { ListObject } from '../api/types.js';
import { canSee, hasScope, type Client } from '../domain/clients.js';
import { ServiceError, invalidRequest, modelFaultError, templateRefusalError } from '../domain/errors.js';
import type { StoredChatCompletion } from '../domain/chat-completions.js';
import { isFinal, type Task } from '../domain/tasks.js';
import type { IdempotencyKey, StoredAnswer } from '../store/index.js';
import { completionIdOf, toolCallsSoFar } from './chat-completion-kind.js';
import type { TaskCore } from './core.js';
import { capOf, tooManyTasks, type TaskLimits } from './limits.js';
import { prepareChatCompletion } from './prepare-chat-completion.js';
import { settleResponseRequest } from './responses.js';

export type CreateChatCompletionOutcome = { replay: StoredAnswer } | { completion: StoredChatCompletion; task: Task };

/** The header that tells a client which task to follow or cancel (LMSP 13). */
export const TASK_ID_HEADER = 'lmsp-task-id';

/**
 * LMSP 11.2 and 13: the completion, its task, its first event and the idempotency key in one
 * transaction, committed before anything is answered. The key stays in flight until the request
 * is answered (`settleChatCompletionRequest`).
 */
export async function createChatCompletion(core: TaskCore, client: Client, body: CreateChatCompletionBody,
  key: IdempotencyKey | null, limits: TaskLimits): Promise<CreateChatCompletionOutcome> {
  const outcome = await core.store.createTask(key, {
    prepare: () => prepareChatCompletion(core, client, body),
    command: ({ completion, task }) => {
      const { task: created, events } = core.machine.draftCreate(task, completion);
      return {
        record: { kind: 'chat_completion', completion }, task: created, events, cap: capOf(client, limits), key, recording: { inFlight: created.id },
      };
    },
  });
  if ('refused' in outcome) throw tooManyTasks(outcome.refused.unfinished, limits);
  if ('revoked' in outcome) throw new ServiceError('invalid_token');
  return 'replay' in outcome ? outcome : { completion: outcome.prepared.completion, task: outcome.task };
}

/** The completion as it is now: while unfinished, the text and tool calls so far. */
export function chatCompletionView(core: Pick<TaskCore, 'store' | 'machine'>, task: Task): ChatCompletionObject {
  const id = completionIdOf(task);
  const completion = core.store.chatCompletions.get(id);
  if (!completion) throw new ServiceError('not_found', `No chat completion with id '${id}'.`, { param: 'completion_id' });
  if (task.finishedAt !== null) return toChatCompletionObject(completion, task, completion.outputText ?? '', completion.toolCalls ?? []);
  const toolCalls = completion.request.tools.length > 0 ? toolCallsSoFar(core.store, task) : [];
  return toChatCompletionObject(completion, task, core.machine.outputText(task), toolCalls);
}

/**
 * What a finished task answers (LMSP 13): 200 with the completion, or, as OpenAI's API answers a
 * failure, an error: `task_failed` (500) or `task_cancelled` (409), each with the task's id.
 */
export function chatCompletionAnswer(core: Pick<TaskCore, 'store' | 'machine'>, task: Task): StoredAnswer {
  const headers = { [TASK_ID_HEADER]: task.id };
  if (task.status === 'completed') return { status: 200, headers, body: chatCompletionView(core, task) };
  const error = taskEndError(task, task.id);
  return { status: error.status, headers: { ...headers, 'x-should-retry': 'false' }, body: error.toBody() };
}

/**
 * The error a task that did not complete ends its request with: `task_cancelled`; for a failure,
 * the model's own fault as a 4xx naming `model` (LMSP 2: a hostile or changed file is input, no
 * 5xx), its chat template's refusal of the messages as 400 `invalid_request` naming `messages`,
 * else `task_failed` with the task's error code first in its message.
 */
export function taskEndError(task: Task | null, taskId: string): ServiceError {
  if (task?.status === 'failed') {
    const code = task.error?.code ?? 'engine_error';
    const message = `${code}: ${task.error?.message ?? 'the task failed'}`;
    return modelFaultError(code, message) ?? templateRefusalError(code, task.error?.message ?? '', 'messages') ?? new ServiceError('task_failed', message);
  }
  return new ServiceError('task_cancelled', `The task ${taskId} was cancelled before it finished.`);
}

/** Events read at a time when a whole stream is rebuilt from the log. */
const PAGE = 500;

/** The whole stream of a finished task, as its frames were sent (a `store: false` create's recorded answer). */
function streamTextOf(core: Pick<TaskCore, 'store'>, task: Task): string {
  let text = '';
  let after = 0;
  const error = () => taskEndError(task, task.id).toBody();
  for (;;) {
    const events = core.store.events.after(task.id, after, PAGE);
    for (const event of events) text += chatStreamFrame(event, error, task.outputStartSeq) ?? '';
    if (events.length < PAGE) return text;
    after = events.at(-1)!.sequenceNumber;
  }
}

/**
 * A plain or streamed create whose request has ended: a client that left cancels the task and
 * releases its key; otherwise the key gets the answer. A `store: false` completion is deleted
 * with its task once finished (LMSP 13).
 */
export function settleChatCompletionRequest(core: TaskCore, task: Task, completion: Pick<StoredChatCompletion, 'store' | 'stream'>, key: IdempotencyKey | null,
  clientGone: () => boolean): Promise<{ finished: Task | null; answer: StoredAnswer | null }> {
  return settleResponseRequest(core, task, key, {
    clientGone,
    storeResponse: completion.store,
    answerOf: (finished) => chatCreateAnswer(core, finished, completion),
  });
}

/** What the key of a finished plain or streamed create records: what its request answered. */
export function chatCreateAnswer(core: Pick<TaskCore, 'store' | 'machine'>, finished: Task, completion: Pick<StoredChatCompletion, 'store' | 'stream'>): StoredAnswer {
  if (!completion.stream) return chatCompletionAnswer(core, finished);
  const headers = { [TASK_ID_HEADER]: finished.id };
  // LMSP 8: a replay sends the chunks again. A kept task replays them from its log; a
  // `store: false` one is deleted now, so its key keeps the stream's text itself.
  if (completion.store) return { status: 200, headers, streamTaskId: finished.id };
  return { status: 200, headers: { ...headers, 'content-type': 'text/event-stream; charset=utf-8' }, body: streamTextOf(core, finished) };
}

/**
 * The task of a stored completion visible to `client`; another client's, and one made with
 * `store: false`, look like one that does not exist (LMSP 4, 13).
 */
export function visibleTaskOfCompletion(core: Pick<TaskCore, 'store'>, client: Client, completionId: string): Task {
  const task = core.store.tasks.getByCompletion(completionId);
  const header = task ? core.store.chatCompletions.getHeader(completionId) : null;
  if (!task || !header || !header.store || !canSee(client, task.clientId)) {
    throw new ServiceError('not_found', `No chat completion with id '${completionId}'.`, { param: 'completion_id' });
  }
  return task;
}

export interface ChatCompletionListRequest {
  limit: number;
  after: string | null;
  order: 'asc' | 'desc';
  model: string | null;
  metadata: Record<string, string>;
}

type CompletionList<T> = ListObject<T> & { first_id: string | null; last_id: string | null };

/** The client's stored completions (all of them with `admin`), a page at a time. */
export function listChatCompletions(core: Pick<TaskCore, 'store' | 'machine'>, client: Client,
  request: ChatCompletionListRequest): CompletionList<ChatCompletionObject> {
  let afterSeq: number | null = null;
  if (request.after !== null) {
    // A cursor that names no visible completion is the request's fault, as for the tasks list.
    try {
      visibleTaskOfCompletion(core, client, request.after);
    } catch {
      throw invalidRequest('after', `No chat completion with id '${request.after}'.`);
    }
    afterSeq = core.store.chatCompletions.seqOf(request.after);
  }
  const { completions, hasMore } = core.store.chatCompletions.list({
    clientId: hasScope(client, 'admin') ? null : client.id,
    model: request.model,
    metadata: request.metadata,
    afterSeq,
    limit: request.limit,
    order: request.order,
  });
  const data = completions.map((completion) => chatCompletionView(core, core.store.tasks.getByCompletion(completion.id)!));
  return { object: 'list', data, has_more: hasMore, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
}

/** The messages a stored completion was asked with, a page at a time. */
export function chatCompletionMessages(core: Pick<TaskCore, 'store'>, client: Client, completionId: string,
  request: { limit: number; after: string | null; order: 'asc' | 'desc' }): CompletionList<ChatMessageObject> {
  visibleTaskOfCompletion(core, client, completionId);
  const completion = core.store.chatCompletions.get(completionId)!;
  const all = toChatMessageObjects(completion.id, completion.messages);
  const ordered = request.order === 'asc' ? all : [...all].reverse();
  let start = 0;
  if (request.after !== null) {
    start = ordered.findIndex((message) => message.id === request.after) + 1;
    if (start === 0) throw invalidRequest('after', `No message with id '${request.after}' in this chat completion.`);
  }
  const data = ordered.slice(start, start + request.limit);
  return { object: 'list', data, has_more: start + request.limit < ordered.length, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
}

/** LMSP 13: `POST /v1/chat/completions/{id}` replaces the metadata (LMSP 8: under its key). */
export async function updateChatCompletion(core: Pick<TaskCore, 'store' | 'machine'>, client: Client, completionId: string,
  metadata: Record<string, string> | null, key: IdempotencyKey | null): Promise<{ answer: StoredAnswer; replayed: boolean }> {
  const outcome = await core.store.idempotent(key, {
    actor: client.id,
    prepare: () => undefined,
    effect: () => {
      const task = visibleTaskOfCompletion(core, client, completionId);
      core.store.chatCompletions.setMetadata(completionId, metadata ?? {});
      const answer: StoredAnswer = { status: 200, body: chatCompletionView(core, task) };
      return { result: answer, record: { answer, taskId: task.id } };
    },
  });
  return 'replay' in outcome ? { answer: outcome.replay, replayed: true } : { answer: outcome.result, replayed: false };
}

/** LMSP 13: DELETE, only once finished; the completion, its task and its events go together. */
export function deleteChatCompletion(core: Pick<TaskCore, 'store'>, client: Client, completionId: string): Promise<ChatCompletionDeleted> {
  const { store } = core;
  return store.db.write(() => {
    const task = visibleTaskOfCompletion(core, client, completionId);
    if (!isFinal(task.status)) {
      throw new ServiceError('response_not_finished', `Chat completion '${completionId}' has not finished; cancel its task first.`);
    }
    store.lifecycle.deleteFinished(task.id);
    return { id: completionId, object: 'chat.completion.deleted', deleted: true };
  });
}
