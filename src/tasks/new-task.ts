/**
 * A new task of any kind, queued, before its first event (LMSP 7.1): what every kind's task
 * starts as, written once. The record it belongs to (a response, a chat completion, a pull) is
 * named by `responseId` or `completionId`, or by neither.
 */
import type { RestartPolicy, Task, TaskKind } from '../domain/tasks.js';
import { newId } from '../ids.js';

export interface NewTask {
  kind: TaskKind;
  clientId: string;
  model: string;
  onRestart: RestartPolicy;
  createdAt: number;
  responseId?: string;
  completionId?: string;
}

export function newTask(fields: NewTask): Task {
  return {
    seq: 0,
    id: newId('task'),
    kind: fields.kind,
    responseId: fields.responseId ?? null,
    completionId: fields.completionId ?? null,
    clientId: fields.clientId,
    model: fields.model,
    status: 'queued',
    onRestart: fields.onRestart,
    attempt: 1,
    restarts: 0,
    createdAt: fields.createdAt,
    startedAt: null,
    finishedAt: null,
    lastSequenceNumber: 0,
    outputStartSeq: 0,
    inputTokens: null,
    outputTokens: 0,
    finishReason: null,
    error: null,
  };
}
