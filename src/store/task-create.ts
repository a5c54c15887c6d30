/**
 * The write of a create (LMSP 11.2, 8, 16) as plain data: a new task with its record (a response
 * or a chat completion), its first events already rendered, the client's cap and its
 * Idempotency-Key with the answer it records. Being data and not a closure, it can be handed to
 * the writer thread (`writer.ts`) as well as run on the connection that answers requests; both
 * run `applyTaskCreate`, so the two ways write the same rows under the same checks.
 */
import type { StoredChatCompletion } from '../domain/chat-completions.js';
import type { StoredResponse } from '../domain/responses.js';
import type { Task } from '../domain/tasks.js';
import type { EventTable } from './events.js';
import type { ChatCompletionTable } from './chat-completions.js';
import type { ClientTable } from './clients.js';
import type { IdempotencyKey, IdempotencyTable, Recording, StoredAnswer } from './idempotency.js';
import type { ResponseTable } from './responses.js';
import type { TaskTable } from './tasks.js';

/** An event of the new task, its payload already built (LMSP 7.3). */
export interface RenderedEvent {
  type: string;
  payload: object;
}

export interface TaskCreate {
  /** The record the task belongs to, inserted first. */
  record: { kind: 'response'; response: StoredResponse } | { kind: 'chat_completion'; completion: StoredChatCompletion };
  /** The task, queued, with `lastSequenceNumber` already counting `events`. */
  task: Task;
  /** Its first events, numbered from 1. */
  events: RenderedEvent[];
  /** LMSP 16: refused when the client already has this many unfinished tasks. */
  cap: { clientId: string; maxUnfinished: number } | null;
  key: IdempotencyKey | null;
  /** What the key records with the effect (LMSP 8). */
  recording: Recording | null;
}

export type TaskCreateOutcome =
  /** Committed: the task's position (`seq`). */
  | { created: number }
  /** The key was used before by this same request: its stored answer. */
  | { replay: StoredAnswer }
  /** Over the client's cap: nothing was written. */
  | { refused: { unfinished: number } }
  /** The client was revoked after its request was authenticated: nothing was written. */
  | { revoked: true };

export interface TaskCreateTables {
  clients: ClientTable;
  responses: ResponseTable;
  chatCompletions: ChatCompletionTable;
  tasks: TaskTable;
  events: EventTable;
  idempotency: IdempotencyTable;
}

/**
 * Runs a create inside the caller's transaction: the key looked up again (two requests may
 * race past the early look-up), the client checked to be still live (LMSP 4: a revoke stops the
 * token at once, a request already past authentication included), the cap checked (concurrent
 * creates cannot all slip under it), then the record, the task, its events and the key. A key
 * in flight or reused with another request throws its ServiceError, as `IdempotencyTable.find`
 * does.
 */
export function applyTaskCreate(tables: TaskCreateTables, command: TaskCreate): TaskCreateOutcome {
  if (command.key) {
    const prior = tables.idempotency.find(command.key);
    if (prior) return { replay: prior };
  }
  if (!tables.clients.isLive(command.task.clientId)) return { revoked: true };
  if (command.cap) {
    const unfinished = tables.tasks.countUnfinishedForClient(command.cap.clientId);
    if (unfinished >= command.cap.maxUnfinished) return { refused: { unfinished } };
  }
  const { record, task } = command;
  if (record.kind === 'response') tables.responses.insert(record.response);
  else tables.chatCompletions.insert(record.completion);
  const seq = tables.tasks.insert(task);
  command.events.forEach((event, index) => tables.events.append(task.id, index + 1, event.type, task.createdAt, event.payload));
  if (command.key && command.recording) tables.idempotency.record(command.key, command.recording);
  return { created: seq };
}
