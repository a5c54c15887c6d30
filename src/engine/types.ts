/**
 * The engine's own vocabulary: the messages, tools, output constraints and sampling a generation
 * is asked for, and what an embedding request carries. The layers above translate their wire
 * and task types into these; nothing here imports from them.
 */

/** A call the assistant made, as the conversation carries it (LMSP 6.2, 13). */
export interface ToolCall {
  /** The call id (`call_...`); the matching tool message names it. */
  id: string;
  name: string;
  /** The arguments as JSON text, as the model wrote them. */
  arguments: string;
}

/**
 * One message of the conversation the model sees. A plain `{role, content}` with role system,
 * developer, user or assistant is a message too, so the task layer's messages pass unchanged.
 */
export type EngineMessage =
  | { role: 'system' | 'developer' | 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: readonly ToolCall[] }
  | { role: 'tool'; toolCallId: string; content: string };

/** A function the model may call (LMSP 6.2 `tools`). */
export interface ToolDefinition {
  name: string;
  description?: string;
  /** A JSON Schema for the arguments; absent means an object with no declared properties. */
  parameters?: Record<string, unknown>;
}

/** LMSP 6.2 `tool_choice`. */
export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

/** LMSP 6.1 `text.format` (13 `response_format`): what the message content must be. */
export type OutputFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; schema: Record<string, unknown> };

export interface Sampling {
  temperature: number;
  topP: number;
  seed: number;
  maxOutputTokens: number;
  /**
   * OpenAI's penalties (-2 to 2, 0 = none): each token's logit is lowered by frequency x the
   * times it was generated so far, and by presence once it was. Absent is 0.
   */
  frequencyPenalty?: number;
  presencePenalty?: number;
  /**
   * OpenAI's `logit_bias` as [token id, bias] pairs, bias -100 to 100: added to the token's logit
   * before each token is sampled; -100 bans the token. Absent is none.
   */
  logitBias?: Array<[number, number]>;
}

/**
 * How a generation ended: `stop` when the model ended it (end of generation, a complete
 * constrained output, a stop sequence), `max_output_tokens` when the budget ran out.
 */
export type FinishReason = 'stop' | 'max_output_tokens';

/** A tool call the model wrote, parsed from its output. */
export interface GeneratedToolCall {
  name: string;
  /** The arguments exactly as generated (JSON text; partial when the call is incomplete). */
  arguments: string;
  /** `incomplete` when max_output_tokens cut the call short. */
  status: 'completed' | 'incomplete';
}

/** One input of an embedding request: text, or token ids of the model's vocabulary. */
export type EmbeddingInput = string | readonly number[];

export interface EmbedRequest {
  /** 1 to 2048 inputs (LMSP 14). */
  inputs: readonly EmbeddingInput[];
  /** Truncate each vector to this many dimensions, then renormalise. */
  dimensions?: number;
}

/** How a model turns its per-token states into one vector (GGUF `<arch>.pooling_type`). */
export type EmbeddingPooling = 'last' | 'mean' | 'cls' | 'rank';

export interface EmbedResult {
  /** L2-normalised vectors, one per input, in input order. */
  embeddings: number[][];
  /** Tokens of each input as evaluated (with the model's BOS/EOS); their sum is the usage. */
  promptTokens: number[];
  pooling: EmbeddingPooling;
}

/** At most this many inputs in one embedding request (LMSP 14). */
export const MAX_EMBEDDING_INPUTS = 2048;
