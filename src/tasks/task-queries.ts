/** Reading tasks and their logs as a client may see them (LMSP 7.1, 7.3; isolation, section 4). */
import { toTaskEvent } from '../api/events.js';
import type { ListObject, TaskEvent, TaskObject } from '../api/types.js';
import { toTaskObject } from '../api/views.js';
import { canSee, hasScope, type Client } from '../domain/clients.js';
import { ServiceError, invalidRequest } from '../domain/errors.js';
import type { Task, TaskKind, TaskStatus } from '../domain/tasks.js';
import type { TaskCore } from './core.js';

type StoreDeps = Pick<TaskCore, 'store'>;

/**
 * The kinds of task a client may read and cancel through /v1/tasks (null: every kind): with
 * `responses` (or `admin`) all of its own; with `models:write` alone its own model pulls, which it
 * starts and is sent to follow (LMSP 5.1: 202 with `Location: /v1/tasks/{id}`); else none.
 */
export function readableTaskKinds(client: Client): TaskKind[] | null {
  if (hasScope(client, 'responses')) return null;
  if (hasScope(client, 'models:write')) return ['model_pull'];
  throw new ServiceError('insufficient_scope', "This needs the 'responses' scope (or 'models:write', for the client's model pulls).");
}

/** Whether `client` may read `task`: its own (any with `admin`), of a kind it reads. */
function readable(client: Client, kinds: TaskKind[] | null, task: Task | null): task is Task {
  return task !== null && canSee(client, task.clientId) && (kinds === null || kinds.includes(task.kind));
}

/** A task visible to `client`; another client's looks like one that does not exist. */
export function visibleTask(deps: StoreDeps, client: Client, taskId: string): Task {
  const task = deps.store.tasks.get(taskId);
  if (!readable(client, readableTaskKinds(client), task)) throw new ServiceError('not_found', `No task with id '${taskId}'.`, { param: 'id' });
  return task;
}

export interface TaskListRequest {
  statuses: TaskStatus[] | null;
  /** Only tasks of these kinds; null for every kind. */
  kinds?: TaskKind[] | null;
  limit: number;
  after: string | null;
  order: 'asc' | 'desc';
}

/** The client's own tasks (all of them with `admin`), a page at a time. */
export function listTasks(deps: StoreDeps, client: Client, request: TaskListRequest): ListObject<TaskObject> & { first_id: string | null; last_id: string | null } {
  const allowed = readableTaskKinds(client);
  let afterSeq: number | null = null;
  if (request.after !== null) {
    const cursor = deps.store.tasks.get(request.after);
    if (!readable(client, allowed, cursor)) throw invalidRequest('after', `No task with id '${request.after}'.`);
    afterSeq = cursor.seq;
  }
  const asked = request.kinds ?? null;
  const kinds = allowed === null ? asked : asked === null ? allowed : asked.filter((kind) => allowed.includes(kind));
  const { tasks, hasMore } = deps.store.tasks.list({
    clientId: hasScope(client, 'admin') ? null : client.id,
    statuses: request.statuses,
    kinds,
    afterSeq,
    limit: request.limit,
    order: request.order,
  });
  const data = tasks.map(toTaskObject);
  return { object: 'list', data, has_more: hasMore, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
}

/** A page of a task's log after `startingAfter`. */
export function taskEventsPage(deps: StoreDeps, task: Task, startingAfter: number, limit: number): ListObject<TaskEvent> {
  const rows = deps.store.events.after(task.id, startingAfter, limit + 1);
  return { object: 'list', data: rows.slice(0, limit).map(toTaskEvent), has_more: rows.length > limit };
}
