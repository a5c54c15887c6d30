/**
 * The wire shapes of Chat Completions (LMSP 13), as the OpenAI Chat Completions API has them, and
 * the pure functions that build them from a stored completion and its task.
 */
import { createHash } from 'node:crypto';
import type { ChatCompletionHeader, ChatCompletionMessage, ChatFinishReason, ChatStoredPart, ChatToolCall } from '../domain/chat-completions.js';
import type { Task } from '../domain/tasks.js';

export interface ChatToolCallObject {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** OpenAI's breakdowns, always 0 here: no prompt cache is reused, no audio, no reasoning, no predictions. */
  prompt_tokens_details: { cached_tokens: number; audio_tokens: number };
  completion_tokens_details: { reasoning_tokens: number; audio_tokens: number; accepted_prediction_tokens: number; rejected_prediction_tokens: number };
}

export interface ChatCompletionObject {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: 0;
    message: { role: 'assistant'; content: string | null; refusal: null; tool_calls?: ChatToolCallObject[]; annotations: [] };
    finish_reason: ChatFinishReason | null;
    logprobs: null;
  }>;
  usage: ChatUsage;
  system_fingerprint: string;
  service_tier: 'default';
  metadata: Record<string, string>;
}

/** One delta of a tool call: the first names the call, the next ones add to its arguments. */
export interface ChatToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  system_fingerprint: string;
  service_tier: 'default';
  choices: Array<{
    index: 0;
    delta: { role?: 'assistant'; content?: string | null; refusal?: null; tool_calls?: ChatToolCallDelta[] };
    finish_reason: ChatFinishReason | null;
    logprobs: null;
  }>;
  usage?: ChatUsage | null;
}

/** A message of a stored completion (`GET /v1/chat/completions/{id}/messages`). */
export interface ChatMessageObject {
  id: string;
  role: ChatCompletionMessage['role'];
  content: string | null;
  name?: string;
  tool_calls?: ChatToolCallObject[];
  tool_call_id?: string;
  /** As OpenAI: the parts when the content was sent as parts, else null. */
  content_parts: ChatStoredPart[] | null;
}

export interface ChatCompletionDeleted {
  id: string;
  object: 'chat.completion.deleted';
  deleted: true;
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * The id of tool call `index` of a completion's attempt: derived, not drawn, so that the chunk
 * that names a call, the finished completion and a resumed generation all agree on it.
 */
export function toolCallId(completionId: string, attempt: number, index: number): string {
  const digest = createHash('sha256').update(`${completionId}:${attempt}:${index}`).digest();
  let id = 'call_';
  for (let i = 0; i < 24; i++) id += BASE62[digest[i]! % 62];
  return id;
}

/** LMSP 13: `length` when max_completion_tokens stopped it, `tool_calls` when it ended with calls. */
export function chatFinishReason(task: Pick<Task, 'status' | 'finishReason'>, toolCallCount: number): ChatFinishReason | null {
  if (task.status !== 'completed') return null;
  if (task.finishReason === 'max_output_tokens') return 'length';
  return toolCallCount > 0 ? 'tool_calls' : 'stop';
}

export function toToolCallObjects(calls: readonly ChatToolCall[]): ChatToolCallObject[] {
  return calls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }));
}

export function chatUsage(task: Pick<Task, 'inputTokens' | 'outputTokens'>): ChatUsage {
  const prompt = task.inputTokens ?? 0;
  return {
    prompt_tokens: prompt, completion_tokens: task.outputTokens, total_tokens: prompt + task.outputTokens,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

/** The completion as it is now: while its task runs, the text and calls so far and no finish reason. */
export function toChatCompletionObject(header: ChatCompletionHeader, task: Task, text: string, toolCalls: readonly ChatToolCall[]): ChatCompletionObject {
  const message: ChatCompletionObject['choices'][0]['message'] = {
    role: 'assistant',
    // OpenAI: a message that only calls tools has no content.
    content: text === '' && toolCalls.length > 0 ? null : text,
    refusal: null,
    annotations: [],
  };
  if (toolCalls.length > 0) message.tool_calls = toToolCallObjects(toolCalls);
  return {
    id: header.id,
    object: 'chat.completion',
    created: header.createdAt,
    model: header.model,
    choices: [{ index: 0, message, finish_reason: chatFinishReason(task, toolCalls.length), logprobs: null }],
    usage: chatUsage(task),
    system_fingerprint: header.systemFingerprint,
    service_tier: 'default',
    metadata: header.metadata,
  };
}

/** One chunk of the stream; with `include_usage` every chunk has `usage`, null but in the last. */
export function toChunk(header: ChatCompletionHeader, delta: ChatCompletionChunk['choices'][0]['delta'],
  finishReason: ChatFinishReason | null): ChatCompletionChunk {
  return {
    id: header.id,
    object: 'chat.completion.chunk',
    created: header.createdAt,
    model: header.model,
    system_fingerprint: header.systemFingerprint,
    service_tier: 'default',
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
    ...(header.includeUsage ? { usage: null } : {}),
  };
}

/** The chunk after the last one when `include_usage`: no choices, the usage. */
export function toUsageChunk(header: ChatCompletionHeader, task: Pick<Task, 'inputTokens' | 'outputTokens'>): ChatCompletionChunk {
  return { ...toChunk(header, {}, null), choices: [], usage: chatUsage(task) };
}

/** The messages of a stored completion, each with an id made of the completion's and its position. */
export function toChatMessageObjects(completionId: string, messages: readonly ChatCompletionMessage[]): ChatMessageObject[] {
  return messages.map((message, index) => {
    const object: ChatMessageObject = {
      id: `${completionId}-${index}`, role: message.role, content: message.content,
      content_parts: message.contentParts ? message.contentParts.map((part) => ({ ...part })) : null,
    };
    if ('name' in message && message.name !== undefined) object.name = message.name;
    if (message.role === 'assistant' && message.toolCalls && message.toolCalls.length > 0) object.tool_calls = toToolCallObjects(message.toolCalls);
    if (message.role === 'tool') object.tool_call_id = message.toolCallId;
    return object;
  });
}

/** A content part of a message: only text parts are served (`refusal` on assistant messages). */
export interface ChatContentPart {
  type: string;
  text?: string;
  refusal?: string;
}

export interface ChatMessageInput {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content?: string | ChatContentPart[] | null;
  // Optional fields may be sent as null, which counts as absent (as OpenAI's clients serialise them).
  name?: string | null;
  tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> | null;
  tool_call_id?: string | null;
}

/** The body of `POST /v1/chat/completions` (LMSP 13). */
export interface CreateChatCompletionBody {
  model: string;
  messages: ChatMessageInput[];
  max_completion_tokens?: number | null;
  max_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  frequency_penalty?: number | null;
  logit_bias?: Record<string, number> | null;
  presence_penalty?: number | null;
  seed?: number | null;
  n?: number | null;
  stop?: string | string[] | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  response_format?: {
    type: 'text' | 'json_object' | 'json_schema';
    json_schema?: { name: string; description?: string | null; schema?: Record<string, unknown>; strict?: boolean | null };
  } | null;
  tools?: Array<{ type: 'function'; function: { name: string; description?: string | null; parameters?: Record<string, unknown> | null; strict?: boolean | null } }> | null;
  tool_choice?: 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } } | null;
  parallel_tool_calls?: boolean | null;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  store?: boolean | null;
  metadata?: Record<string, string> | null;
  on_restart?: 'fail' | 'retry' | 'resume' | null;
}
