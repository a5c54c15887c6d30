/** What the response and task routes share: finding a visible task, views, cancel, waiting, streaming. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../../api/errors.js';
import type { ResponseObject } from '../../api/types.js';
import { toResponseObject } from '../../api/views.js';
import type { Client } from '../../auth/types.js';
import type { Store } from '../../store/index.js';
import type { CancelOutcome } from '../../store/task-lifecycle.js';
import { followTask, type FollowEnd } from '../../tasks/follow.js';
import { isFinal } from '../../tasks/states.js';
import type { Task } from '../../tasks/types.js';
import { canSee } from '../auth.js';
import { idempotencyOf, priorAnswer, sendStoredAnswer, storeAnswer, type StoredAnswer } from '../idempotency.js';
import type { AppServices } from '../services.js';
import { EventStream } from '../sse.js';

/** The task of a response visible to `client`; another client's looks like one that does not exist. */
export function visibleTaskOfResponse(store: Store, client: Client, responseId: string): Task {
  const task = store.tasks.getByResponse(responseId);
  if (!task || !canSee(client, task.clientId)) throw new ServiceError('not_found', `No response with id '${responseId}'.`, { param: 'id' });
  return task;
}

export function visibleTask(store: Store, client: Client, taskId: string): Task {
  const task = store.tasks.get(taskId);
  if (!task || !canSee(client, task.clientId)) throw new ServiceError('not_found', `No task with id '${taskId}'.`, { param: 'id' });
  return task;
}

/** The response as it is now: while unfinished, `output` holds the text generated so far. */
export function responseView(store: Store, task: Task): ResponseObject {
  const header = store.responses.getHeader(task.responseId);
  if (!header) throw new ServiceError('not_found', `No response with id '${task.responseId}'.`);
  const text = task.finishedAt !== null ? store.responses.outputText(task.responseId) ?? '' : store.lifecycle.outputText(task);
  return toResponseObject(header, task, text);
}

/** LMSP 7.4: 200 when the task is (now or already) cancelled, 202 while it is cancelling. */
export function cancelStatus(outcome: CancelOutcome): number {
  switch (outcome.kind) {
    case 'cancelled':
    case 'already_cancelled':
      return 200;
    case 'cancelling':
    case 'already_cancelling':
      return 202;
    case 'not_cancellable':
      throw new ServiceError('task_not_cancellable', `The task has already ${outcome.task.status === 'completed' ? 'completed' : 'failed'}.`);
  }
}

/**
 * A cancel route (responses and tasks share it): one transaction holding the cancel, the
 * idempotency key and its answer.
 */
export async function handleCancel(services: AppServices, request: FastifyRequest, reply: FastifyReply, client: Client,
  findTask: () => Task, view: (task: Task) => unknown): Promise<FastifyReply> {
  const { store, config } = services;
  const idempotency = idempotencyOf(request, `client:${client.id}`);
  const early = idempotency ? priorAnswer(store, idempotency) : null;
  if (early) return sendStoredAnswer(reply, early);
  const result = await store.db.write((context): { replay: StoredAnswer } | { answer: StoredAnswer } => {
    const prior = idempotency ? priorAnswer(store, idempotency) : null;
    if (prior) return { replay: prior };
    const task = findTask();
    const outcome = store.lifecycle.cancel(context, task.id);
    if (!outcome) throw new ServiceError('not_found', `No task with id '${task.id}'.`);
    const status = cancelStatus(outcome);
    const answer: StoredAnswer = { status, body: view(store.tasks.get(task.id)!) };
    if (idempotency) storeAnswer(store, idempotency, config.idempotencyTtlMs, answer, task.id);
    return { answer };
  });
  if ('replay' in result) return sendStoredAnswer(reply, result.replay);
  return reply.code(result.answer.status).send(result.answer.body);
}

/** Resolves with the task once it has finished (or is gone). */
export function waitForFinish(services: AppServices, taskId: string): Promise<Task | null> {
  return new Promise((resolve) => {
    const check = () => {
      const task = services.store.tasks.get(taskId);
      if (!task || isFinal(task.status)) {
        unsubscribe();
        resolve(task);
      }
    };
    const unsubscribe = services.bus.subscribe(taskId, check);
    check();
  });
}

/** Cancels a task whose client went away (LMSP section 6), ignoring a task that already finished. */
export async function cancelForDisconnect(services: AppServices, taskId: string): Promise<void> {
  await services.store.db.write((context) => services.store.lifecycle.cancel(context, taskId)).catch(() => undefined);
}

/** Streams a task's log after `afterSequence` as server-sent events until its terminal event. */
export async function streamTaskEvents(services: AppServices, reply: FastifyReply, taskId: string, afterSequence: number,
  headers: Record<string, string> = {}): Promise<{ end: FollowEnd; clientGone: boolean }> {
  const stream = new EventStream(reply, services.heartbeatMs, headers);
  try {
    const end = await followTask(services.store, services.bus, taskId, afterSequence, stream.signal, (events) => stream.send(events));
    return { end, clientGone: stream.clientGone };
  } finally {
    stream.end();
  }
}
