/** Domain records to wire objects: one function per object, so every answer and event agrees. */
import type { Client } from '../domain/clients.js';
import type { Model } from '../domain/models.js';
import { taskErrorType } from '../domain/errors.js';
import type { ResponseHeader, ResponseInputItem } from '../domain/responses.js';
import { isIncomplete, type Task, type TaskStatus } from '../domain/tasks.js';
import type { ClientObject, FunctionCallItem, InputItemObject, ModelObject, OutputMessage, OutputText, ResponseObject, ResponseStatus, TaskObject } from './types.js';

/** A part of output text as OpenAI writes it, in responses, their events and input items alike. */
export function outputTextPart(text: string): OutputText {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

/** What a response's `status` is while its task is in each state (LMSP section 6). */
export function responseStatusOf(task: Pick<Task, 'status' | 'finishReason'>): ResponseStatus {
  switch (task.status as TaskStatus) {
    case 'queued':
      return 'queued';
    case 'loading':
    case 'running':
    case 'cancelling':
      return 'in_progress';
    case 'completed':
      return isIncomplete(task.finishReason) ? 'incomplete' : 'completed';
    case 'failed':
      return 'failed';
    case 'cancelled':
      return 'cancelled';
  }
}

/** The status of the output message once its task stopped, or while it runs. */
export function outputItemStatusOf(task: Pick<Task, 'status' | 'finishReason'>): OutputMessage['status'] {
  if (task.status === 'completed') return isIncomplete(task.finishReason) ? 'incomplete' : 'completed';
  if (task.status === 'failed' || task.status === 'cancelled') return 'incomplete';
  return 'in_progress';
}

function outputOf(response: ResponseHeader, task: Task, text: string): OutputMessage[] {
  // No output item exists before the task first runs (OpenAI: `output` is [] while queued), and
  // a retry drops the earlier attempt's output until the new attempt starts (LMSP 7.5).
  if (task.startedAt === null || (task.status === 'queued' && text === '')) return [];
  return [{
    type: 'message', id: response.outputItemId, role: 'assistant', status: outputItemStatusOf(task),
    content: [outputTextPart(text)],
  }];
}

/**
 * `toolItems`: with tools (LMSP 6.2), the output items as they are (the message only when it has
 * text, then the function calls); without, the one message holding `text`.
 */
export function toResponseObject(response: ResponseHeader, task: Task, text: string, toolItems?: Array<OutputMessage | FunctionCallItem>): ResponseObject {
  const status = responseStatusOf(task);
  return {
    id: response.id,
    object: 'response',
    created_at: response.createdAt,
    status,
    // OpenAI's: when the response completed, only for `completed` (not `incomplete`, `failed`, ...).
    completed_at: status === 'completed' ? task.finishedAt : null,
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
    output: toolItems === undefined ? outputOf(response, task, text)
      // Read `type` first: ResponseObject types `output` as messages (see its comment).
      : task.startedAt === null || (task.status === 'queued' && toolItems.length === 0) ? [] : toolItems as OutputMessage[],
    usage: task.inputTokens === null
      ? null
      : {
        input_tokens: task.inputTokens,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: task.outputTokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: task.inputTokens + task.outputTokens,
      },
    // `type` beside the spec's code and message: the AI SDK reads a failed response only with it.
    error: task.error ? { code: task.error.code, message: task.error.message, type: taskErrorType(task.error.code) } : null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    task: {
      id: task.id,
      status: task.status,
      on_restart: task.onRestart,
      attempt: task.attempt,
      last_sequence_number: task.lastSequenceNumber,
    },
    ...requestedOutputOf(response),
  };
}

/** The output items of a finished response with tools: its message when it has text, then its calls. */
export function finishedToolItems(response: ResponseHeader, task: Task, text: string,
  calls: ReadonlyArray<{ id: string; callId: string; name: string; arguments: string; status: 'completed' | 'incomplete' }>): Array<OutputMessage | FunctionCallItem> {
  const items: Array<OutputMessage | FunctionCallItem> = [];
  if (text !== '') {
    items.push({
      type: 'message', id: response.outputItemId, role: 'assistant', status: calls.length > 0 ? 'completed' : outputItemStatusOf(task),
      content: [outputTextPart(text)],
    });
  }
  for (const call of calls) {
    items.push({ type: 'function_call', id: call.id, call_id: call.callId, name: call.name, arguments: call.arguments, status: call.status });
  }
  return items;
}

/** LMSP 6.1, 6.2: what the request asked of the output, as OpenAI shows it on the response. */
function requestedOutputOf(response: ResponseHeader): Pick<ResponseObject, 'text' | 'tools' | 'tool_choice' | 'parallel_tool_calls' | 'truncation'> {
  return {
    text: { format: response.textFormat ?? { type: 'text' } },
    tools: (response.tools ?? []).map((tool) => ({ ...tool })),
    tool_choice: response.toolChoice ?? 'auto',
    parallel_tool_calls: response.parallelToolCalls ?? true,
    truncation: response.truncation ?? 'disabled',
  };
}

/** An input item as `input_items` lists it: OpenAI's item shapes, `annotations` on output text. */
export function toInputItemObject(item: ResponseInputItem): InputItemObject {
  if (item.type !== 'message') return item;
  return {
    ...item,
    content: item.content.map((part) => (part.type === 'output_text' ? outputTextPart(part.text) : { type: 'input_text', text: part.text })),
  };
}

export function toTaskObject(task: Task): TaskObject {
  return {
    id: task.id,
    object: 'task',
    kind: task.kind,
    response_id: task.responseId,
    completion_id: task.completionId,
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

/** LMSP 5: `path` only for clients that may register models. */
export function toModelObject(model: Model, loaded: boolean, includePath: boolean): ModelObject {
  return {
    id: model.id,
    object: 'model',
    created: model.createdAt,
    owned_by: 'lmsp',
    digest: model.digest,
    size_bytes: model.sizeBytes,
    format: 'gguf',
    architecture: model.architecture,
    context_length: model.contextLength,
    parameters: model.parameters,
    quantization: model.quantization,
    tokenizer: model.tokenizer,
    status: model.status,
    loaded,
    ...(includePath ? { path: model.path } : {}),
  };
}

export function toClientObject(client: Client): ClientObject {
  return {
    object: 'client',
    id: client.id,
    name: client.name,
    scopes: client.scopes,
    created_at: client.createdAt,
    last_used_at: client.lastUsedAt,
    revoked_at: client.revokedAt,
  };
}
