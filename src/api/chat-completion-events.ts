/**
 * The events of a chat completion's task (LMSP 13): the status events carry the completion as it
 * is then, `chat.completion.chunk` carries each chunk exactly as it is streamed, and the terminal
 * `chat.completion.completed` the whole completion. Pure functions, like response-events.ts:
 * each returns the drafts the store appends in the transaction of the change they belong to.
 */
import type { ChatCompletionHeader, ChatToolCall } from '../domain/chat-completions.js';
import type { ErrorBody } from '../domain/errors.js';
import type { EventDraft, FinishReason, LoggedEvent } from '../domain/tasks.js';
import {
  chatFinishReason, toChatCompletionObject, toChunk, toolCallId, toUsageChunk, type ChatCompletionChunk, type ChatToolCallDelta,
} from './chat-completions.js';

/** What an output unit of the engine carries of tool calls (structurally, without importing the engine). */
export interface ToolCallPieces {
  toolCalls?: ReadonlyArray<{ index: number; name: string; arguments: string }>;
}

export const CHAT_CHUNK_EVENT = 'chat.completion.chunk';

/** The event that carries generated text, and where in its payload the text is. */
export const CHAT_TEXT_DELTA = { type: CHAT_CHUNK_EVENT, path: '$.chunk.choices[0].delta.content' } as const;

export const CHAT_TERMINAL_EVENTS = ['chat.completion.completed', 'chat.completion.failed', 'chat.completion.cancelled'] as const;

function withCompletion(type: string, header: ChatCompletionHeader, text: string, toolCalls: readonly ChatToolCall[] = []): EventDraft {
  return { type, payload: (task) => ({ completion: toChatCompletionObject(header, task, text, toolCalls) }) };
}

function chunkEvent(chunk: (attempt: number) => ChatCompletionChunk, tokens?: readonly number[]): EventDraft {
  return { type: CHAT_CHUNK_EVENT, payload: (task) => ({ chunk: chunk(task.attempt) }), ...(tokens ? { tokens } : {}) };
}

/**
 * The tool call deltas of some output units, as the chunks that carry them. `announced` holds
 * the calls already named in this attempt's chunks: as in OpenAI's stream, a call is named once,
 * in a chunk of its own with empty `arguments` (clients such as LangChain join repeated names),
 * and the chunks after it only add `function.arguments`, those of one call joined.
 */
function toolCallChunks(header: ChatCompletionHeader, units: readonly ToolCallPieces[], announced: Set<number>, attempt: number): ChatToolCallDelta[][] {
  const chunks: ChatToolCallDelta[][] = [];
  let current: ChatToolCallDelta[] = [];
  for (const unit of units) {
    for (const call of unit.toolCalls ?? []) {
      if (!announced.has(call.index)) {
        announced.add(call.index);
        if (current.length > 0) chunks.push(current);
        current = [];
        chunks.push([{ index: call.index, id: toolCallId(header.id, attempt, call.index), type: 'function', function: { name: call.name, arguments: '' } }]);
      }
      if (call.arguments === '') continue;
      const last = current.at(-1);
      if (last && last.index === call.index) last.function.arguments += call.arguments;
      else current.push({ index: call.index, function: { arguments: call.arguments } });
    }
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

export const chatCompletionEvents = {
  created: (header: ChatCompletionHeader): EventDraft[] => [withCompletion('chat.completion.created', header, '')],
  loading: (header: ChatCompletionHeader): EventDraft[] => [withCompletion('chat.completion.loading', header, '')],

  /** Running, and the first chunk, which names the role (as OpenAI's stream does). */
  running: (header: ChatCompletionHeader): EventDraft[] => [
    withCompletion('chat.completion.in_progress', header, ''),
    chunkEvent(() => toChunk(header, { role: 'assistant', content: '', refusal: null }, null)),
  ],

  /**
   * Generated output: a chunk of content, chunks of tool call deltas, or both in that order;
   * the first carries the token ids of the whole batch (the resume snapshot, LMSP 7.5).
   */
  output: (header: ChatCompletionHeader, text: string, tokens: readonly number[], units: readonly ToolCallPieces[],
    attempt: number, announced: Set<number>): EventDraft[] => {
    const calls = toolCallChunks(header, units, announced, attempt);
    const drafts: EventDraft[] = [];
    if (text !== '' || calls.length === 0) drafts.push(chunkEvent(() => toChunk(header, { content: text }, null)));
    for (const deltas of calls) drafts.push(chunkEvent(() => toChunk(header, { tool_calls: deltas }, null)));
    drafts[0] = { ...drafts[0]!, tokens };
    return drafts;
  },

  /** The last chunk with its finish reason, the usage chunk when asked for, then the whole completion. */
  finished: (header: ChatCompletionHeader, text: string, finishReason: FinishReason, toolCalls: readonly { name: string; arguments: string }[]): EventDraft[] => {
    const reason = chatFinishReason({ status: 'completed', finishReason }, toolCalls.length);
    const drafts: EventDraft[] = [chunkEvent(() => toChunk(header, {}, reason))];
    if (header.includeUsage) drafts.push({ type: CHAT_CHUNK_EVENT, payload: (task) => ({ chunk: toUsageChunk(header, task) }) });
    drafts.push({
      type: 'chat.completion.completed',
      payload: (task) => ({
        completion: toChatCompletionObject(header, task, text,
          toolCalls.map((call, index) => ({ id: toolCallId(header.id, task.attempt, index), name: call.name, arguments: call.arguments }))),
      }),
    });
    return drafts;
  },

  /** As `response.failed` carries the response with its error: the completion has no field for one, so the event does. */
  failed: (header: ChatCompletionHeader, text: string): EventDraft[] => [{
    type: 'chat.completion.failed',
    payload: (task) => ({
      completion: toChatCompletionObject(header, task, text, []),
      error: task.error ? { code: task.error.code, message: task.error.message } : null,
    }),
  }],
  cancelling: (header: ChatCompletionHeader, text: string): EventDraft[] => [withCompletion('chat.completion.cancelling', header, text)],
  cancelled: (header: ChatCompletionHeader, text: string): EventDraft[] => [withCompletion('chat.completion.cancelled', header, text)],
  /** Queued again after a restart (LMSP 7.5); under retry the earlier output is dropped. */
  requeued: (header: ChatCompletionHeader, text: string): EventDraft[] => [withCompletion('chat.completion.queued', header, text)],
  /** Continued from its snapshot after a restart (LMSP 7.5). */
  resumed: (header: ChatCompletionHeader, text: string): EventDraft[] => [{
    type: 'chat.completion.resumed',
    payload: (task) => ({ completion: toChatCompletionObject(header, task, text, []), completion_tokens: task.outputTokens }),
  }],
};

const CHUNK_PREFIX = '{"chunk":';
/**
 * How a chunk whose delta is an empty text reads in the log. Nothing a client sends can write
 * these bytes unescaped before them (the id and model hold no quotes), so the test is exact.
 */
const EMPTY_DELTA = '"choices":[{"index":0,"delta":{"content":""},"finish_reason":null,';

/**
 * The `data:` frame a logged event becomes in a chat completion's stream (LMSP 13), if any: a
 * chunk of the current attempt (from `outputStartSeq` on, the task's) as it was logged, `[DONE]`
 * after the completed event, an error frame (`error()`) after a failed or cancelled one. The
 * status events are the log's, not the stream's. A chunk with an empty delta (the tokens of a
 * tool call's syntax, or text held back while it may still begin a stop sequence) stays in the
 * log for the resume snapshot it carries, and is not sent: OpenAI's stream has no empty deltas.
 */
export function chatStreamFrame(event: LoggedEvent, error: () => ErrorBody, outputStartSeq: number): string | null {
  switch (event.type) {
    case CHAT_CHUNK_EVENT:
      // LMSP 7.5: a chunk of an attempt that `retry` dropped is no part of the completion.
      if (event.sequenceNumber < outputStartSeq) return null;
      if (event.data.includes(EMPTY_DELTA)) return null;
      // The payload is `{"chunk":<chunk>}`: the chunk's JSON as stored, without parsing it again.
      return `data: ${event.data.startsWith(CHUNK_PREFIX) ? event.data.slice(CHUNK_PREFIX.length, -1) : event.data}\n\n`;
    case 'chat.completion.completed':
      return 'data: [DONE]\n\n';
    case 'chat.completion.failed':
    case 'chat.completion.cancelled':
      return `data: ${JSON.stringify(error())}\n\n`;
    default:
      return null;
  }
}
