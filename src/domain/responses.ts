/** Responses as the service stores them (LMSP section 6), in the domain's words (camelCase). */

export type MessageRole = 'user' | 'assistant' | 'system' | 'developer';

/**
 * One message of the conversation the model sees: an assistant message may carry the calls it
 * made, and a tool message the output of one (LMSP 6.2).
 */
export type ChatMessage =
  | { role: MessageRole; content: string; toolCalls?: ToolCallRef[] }
  | { role: 'tool'; toolCallId: string; content: string };

/** A call as the conversation carries it: its `call_id`, the function and the arguments' JSON. */
export interface ToolCallRef {
  id: string;
  name: string;
  arguments: string;
}

/** An input item as the client sent it, normalised to the OpenAI item shapes. */
export type ResponseInputItem = InputItem | FunctionCallInputItem | FunctionCallOutputInputItem;

/** An item's status as OpenAI gives it; an item sent without one is `completed`. */
export type InputItemStatus = 'in_progress' | 'completed' | 'incomplete';

/** An input message, normalised to the OpenAI message item shape. */
export interface InputItem {
  id: string;
  type: 'message';
  role: MessageRole;
  status: InputItemStatus;
  content: Array<{ type: 'input_text' | 'output_text'; text: string }>;
}

/** LMSP 6.2: a call the model made earlier, given back as input. */
export interface FunctionCallInputItem {
  id: string;
  type: 'function_call';
  call_id: string;
  name: string;
  arguments: string;
  status: InputItemStatus;
}

/** LMSP 6.2: the output of a call, given to the model. */
export interface FunctionCallOutputInputItem {
  id: string;
  type: 'function_call_output';
  call_id: string;
  output: string;
  status: InputItemStatus;
}

export interface StoredResponse {
  id: string;
  clientId: string;
  model: string;
  createdAt: number;
  background: boolean;
  stream: boolean;
  store: boolean;
  instructions: string | null;
  previousResponseId: string | null;
  maxOutputTokens: number;
  temperature: number;
  topP: number;
  seed: number;
  metadata: Record<string, string>;
  inputItems: ResponseInputItem[];
  /** Every message the model sees, previous responses included (the instructions are kept apart). */
  context: ChatMessage[];
  outputItemId: string;
  /** Final text, set when the task finishes; while it runs the text lives in its delta events. */
  outputText: string | null;
  /** LMSP 6.1 `text.format`; absent means plain text. */
  textFormat?: TextFormat;
  /** LMSP 6.2: the functions offered, `tool_choice` and `parallel_tool_calls`; absent means none, auto, true. */
  tools?: FunctionTool[];
  toolChoice?: ResponseToolChoice;
  parallelToolCalls?: boolean;
  /** OpenAI's `truncation`: `auto` leaves out the oldest messages that do not fit; absent is `disabled`. */
  truncation?: 'disabled' | 'auto';
  /** The function calls of the finished response; while it runs they live in its events. */
  outputCalls?: FunctionCallOutput[] | null;
}

/** The fields of a response that never change after it is created: all that views need. */
export type ResponseHeader = Omit<StoredResponse, 'inputItems' | 'context' | 'outputText' | 'outputCalls'>;

/** The messages the model sees: the instructions first, then the conversation. */
export function promptMessages(response: Pick<StoredResponse, 'instructions' | 'context'>): ChatMessage[] {
  return response.instructions ? [{ role: 'system', content: response.instructions }, ...response.context] : response.context;
}

/** LMSP 6.1 `text.format`: what the output text must be, as the request gave it. */
export type TextFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict: boolean | null; description?: string };

/** LMSP 6.2: a function the model may call, as the request gave it. */
export interface FunctionTool {
  type: 'function';
  name: string;
  description: string | null;
  parameters: Record<string, unknown> | null;
  strict: boolean | null;
}

/** LMSP 6.2 `tool_choice`. */
export type ResponseToolChoice = 'auto' | 'none' | 'required' | { type: 'function'; name: string };

/** A function call the model made (LMSP 6.2), as the finished response keeps it. */
export interface FunctionCallOutput {
  id: string;
  callId: string;
  name: string;
  arguments: string;
  status: 'completed' | 'incomplete';
}
