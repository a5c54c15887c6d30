/** Domain records to wire objects: one function per object, so every answer and event agrees. */
import { responseStatusOf } from '../tasks/states.js';
import type { ResponseHeader, Task } from '../tasks/types.js';
import type { OutputMessage, ResponseObject, TaskObject } from './types.js';

function outputOf(response: ResponseHeader, task: Task, text: string): OutputMessage[] {
  // No output item exists before the task first runs (OpenAI: `output` is [] while queued), and
  // a retry drops the earlier attempt's output until the new attempt starts (LMSP 7.5).
  if (task.startedAt === null || (task.status === 'queued' && text === '')) return [];
  let status: OutputMessage['status'] = 'in_progress';
  if (task.status === 'completed') status = task.finishReason === 'max_output_tokens' ? 'incomplete' : 'completed';
  else if (task.status === 'failed' || task.status === 'cancelled') status = 'incomplete';
  return [{ type: 'message', id: response.outputItemId, role: 'assistant', status, content: [{ type: 'output_text', text, annotations: [] }] }];
}

export function toResponseObject(response: ResponseHeader, task: Task, text: string): ResponseObject {
  const status = responseStatusOf(task.status, task.finishReason);
  return {
    id: response.id,
    object: 'response',
    created_at: response.createdAt,
    status,
    background: response.background,
    model: response.model,
    instructions: response.instructions,
    previous_response_id: response.previousResponseId,
    max_output_tokens: response.maxOutputTokens,
    temperature: response.temperature,
    top_p: response.topP,
    seed: response.seed,
    store: response.store,
    metadata: response.metadata,
    output: outputOf(response, task, text),
    usage: task.inputTokens === null
      ? null
      : { input_tokens: task.inputTokens, output_tokens: task.outputTokens, total_tokens: task.inputTokens + task.outputTokens },
    error: task.error ? { code: task.error.code, message: task.error.message } : null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    task: {
      id: task.id,
      status: task.status,
      on_restart: task.onRestart,
      attempt: task.attempt,
      last_sequence_number: task.lastSequenceNumber,
    },
  };
}

export function toTaskObject(task: Task): TaskObject {
  return {
    id: task.id,
    object: 'task',
    kind: task.kind,
    response_id: task.responseId,
    client_id: task.clientId,
    model: task.model,
    status: task.status,
    on_restart: task.onRestart,
    attempt: task.attempt,
    created_at: task.createdAt,
    started_at: task.startedAt,
    finished_at: task.finishedAt,
    last_sequence_number: task.lastSequenceNumber,
    error: task.error ? { code: task.error.code, message: task.error.message } : null,
  };
}
