/**
 * Chat completions as the service stores them (LMSP section 13), in the domain's words. A chat
 * completion is the record behind a task of kind `chat_completion`: what was asked (the
 * messages, the sampling, the output format, the tools) and, once its task has finished, the
 * message the model wrote.
 */

/** A call the assistant made, as a conversation carries it (`tool_calls[]` of a message). */
export interface ChatToolCall {
  id: string;
  name: string;
  /** The arguments as JSON text, as the model wrote them. */
  arguments: string;
}

/** One message of the conversation as the client sent it, its content joined into text. */
export type ChatCompletionMessage = (
  | { role: 'system' | 'developer' | 'user'; content: string; name?: string }
  | { role: 'assistant'; content: string | null; toolCalls?: ChatToolCall[]; name?: string }
  | { role: 'tool'; content: string; toolCallId: string }
) & {
  /** The parts, when the content was sent as parts (OpenAI's stored `content_parts`); `content` is their text. */
  contentParts?: ChatStoredPart[];
};

/** A content part as stored: text, or an assistant's refusal. */
export type ChatStoredPart = { type: 'text'; text: string } | { type: 'refusal'; refusal: string };

/** LMSP 13 `response_format`, enforced as in 6.1. */
export type ChatResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict: boolean | null };

export interface ChatTool {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
}

export type ChatToolChoice = 'auto' | 'none' | 'required' | { name: string };

/** What the generation is asked for; fixed when the completion is created. */
export interface ChatCompletionRequest {
  maxCompletionTokens: number;
  temperature: number;
  topP: number;
  seed: number;
  /** -2 to 2; absent (as in completions stored before they were kept) is 0. */
  frequencyPenalty?: number;
  presencePenalty?: number;
  /** OpenAI's `logit_bias` as [token id, bias] pairs; absent is none. */
  logitBias?: Array<[number, number]>;
  stop: string[];
  responseFormat: ChatResponseFormat;
  tools: ChatTool[];
  toolChoice: ChatToolChoice | null;
  parallelToolCalls: boolean;
}

export interface StoredChatCompletion {
  id: string;
  clientId: string;
  model: string;
  createdAt: number;
  stream: boolean;
  /** `store: false`: the completion and its task are deleted once it finishes. */
  store: boolean;
  /** `stream_options.include_usage`: the stream ends with a usage chunk. */
  includeUsage: boolean;
  systemFingerprint: string;
  metadata: Record<string, string>;
  request: ChatCompletionRequest;
  messages: ChatCompletionMessage[];
  /** The message content, set when the task finishes; while it runs it lives in its chunk events. */
  outputText: string | null;
  /** The calls the model made, set when the task finishes. */
  toolCalls: ChatToolCall[] | null;
}

/** Everything but the conversation and the output: all that the events of its task need. */
export type ChatCompletionHeader = Omit<StoredChatCompletion, 'messages' | 'outputText' | 'toolCalls'>;

/** LMSP 13 `finish_reason`. */
export type ChatFinishReason = 'stop' | 'length' | 'tool_calls';
