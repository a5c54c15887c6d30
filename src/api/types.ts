/**
 * Wire types of LMSP 1.0: what clients send and receive (the glossary of the domain is at the
 * top of src/domain/tasks.ts).
 */
import type { RestartPolicy, TaskKind, TaskStatus } from '../domain/tasks.js';
import type { ModelStatus } from '../domain/models.js';
import type { FunctionCallInputItem, FunctionCallOutputInputItem, InputItem, MessageRole } from '../domain/responses.js';

export type { ErrorBody } from '../domain/errors.js';
export type { ModelStatus };

/** A response's `status` (LMSP section 6). */
export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled';

export interface OutputText {
  type: 'output_text';
  text: string;
  annotations: [];
  /** Always empty, as OpenAI's part without `include: ["message.output_text.logprobs"]`. */
  logprobs: [];
}

export interface OutputMessage {
  type: 'message';
  id: string;
  role: 'assistant';
  status: 'in_progress' | 'completed' | 'incomplete';
  content: OutputText[];
}

/** LMSP 6.2: a call of one of the request's functions; `arguments` is JSON text. */
export interface FunctionCallItem {
  type: 'function_call';
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: 'in_progress' | 'completed' | 'incomplete';
}

export type ResponseOutputItem = OutputMessage | FunctionCallItem;

export interface ResponseTaskSummary {
  id: string;
  status: TaskStatus;
  on_restart: RestartPolicy;
  attempt: number;
  last_sequence_number: number;
}

/**
 * As OpenAI's, whose clients (its Python SDK's types, the Agents SDK) read the details without
 * checking for them; lmsp counts no cached or reasoning tokens, so both are 0.
 */
export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponseStatus;
  /** Seconds since the epoch when it completed; null unless `status` is `completed`. */
  completed_at: number | null;
  background: boolean;
  model: string;
  instructions: string | null;
  previous_response_id: string | null;
  max_output_tokens: number;
  temperature: number;
  top_p: number;
  seed: number;
  store: boolean;
  metadata: Record<string, string>;
  /**
   * The message, typed as such for the many readers that only send text; with `tools`,
   * function call items (FunctionCallItem) follow it or stand alone: check `type` first.
   */
  output: OutputMessage[];
  usage: ResponseUsage | null;
  /** LMSP 6's code and message, and the type of the HTTP error of the same code (the AI SDK needs one). */
  error: { code: string; message: string; type: string } | null;
  incomplete_details: { reason: 'max_output_tokens' } | null;
  task: ResponseTaskSummary;
  /** LMSP 6.1, as OpenAI shows it: `{format: {type: "text"}}` by default. */
  text: { format: TextFormatObject };
  /** LMSP 6.2. */
  tools: FunctionToolObject[];
  tool_choice: ToolChoiceParam;
  parallel_tool_calls: boolean;
  /** OpenAI's: `disabled` or `auto`. */
  truncation: 'disabled' | 'auto';
}

/** LMSP 6.1 `text.format` as the response shows it. */
export type TextFormatObject =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict: boolean | null; description?: string };

/** LMSP 6.2: a function the model may call. */
export interface FunctionToolObject {
  type: 'function';
  name: string;
  description: string | null;
  parameters: Record<string, unknown> | null;
  strict: boolean | null;
}

export type ToolChoiceParam = 'auto' | 'none' | 'required' | { type: 'function'; name: string };

export interface TaskObject {
  id: string;
  object: 'task';
  kind: TaskKind;
  response_id: string | null;
  completion_id: string | null;
  client_id: string;
  model: string;
  status: TaskStatus;
  on_restart: RestartPolicy;
  attempt: number;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  last_sequence_number: number;
  error: { code: string; message: string } | null;
}

/** One event of a task's log; the payload sits at the top level, as in the OpenAI stream. */
export interface TaskEvent {
  sequence_number: number;
  type: string;
  created_at: number;
  [payload: string]: unknown;
}

export interface ListObject<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
}

/** An input message on the wire: its `output_text` parts carry `annotations`, as OpenAI's do. */
export interface InputMessageObject extends Omit<InputItem, 'content'> {
  content: Array<{ type: 'input_text'; text: string } | OutputText>;
}

export type InputItemObject = InputMessageObject | FunctionCallInputItem | FunctionCallOutputInputItem;

export interface InputItemList extends ListObject<InputItemObject> {
  first_id: string | null;
  last_id: string | null;
}

export interface ServiceObject {
  object: 'service';
  id: string;
  name: string;
  protocol: 'lmsp';
  protocol_version: '1.0';
  software: { name: 'lmsp'; version: string };
  capabilities: {
    background: boolean; stream: boolean; resume: boolean; idempotency: boolean; chat_completions: boolean;
    embeddings: boolean; structured_output: boolean; tools: boolean; model_pull: boolean;
  };
}

export interface ModelObject {
  id: string;
  object: 'model';
  created: number;
  owned_by: 'lmsp';
  digest: string;
  size_bytes: number;
  format: 'gguf';
  architecture: string | null;
  context_length: number | null;
  parameters: number | null;
  quantization: string | null;
  tokenizer: string | null;
  status: ModelStatus;
  loaded: boolean;
  path?: string;
}

export interface ClientObject {
  object: 'client';
  id: string;
  name: string;
  scopes: string[];
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

export interface PairingCodeObject {
  object: 'pairing_code';
  code: string;
  name: string | null;
  scopes: string[];
  expires_at: number;
}

/** An input item's status as OpenAI's types have it; null and absent mean `completed`. */
export type InputItemStatusInput = 'in_progress' | 'completed' | 'incomplete' | null;

export interface MessageInput {
  role: MessageRole;
  content: string | Array<{ type: 'input_text' | 'output_text'; text: string }>;
  type?: 'message';
  /** As OpenAI: an item given back (a previous output message) keeps its id and status. */
  id?: string | null;
  status?: InputItemStatusInput;
}

/** The body of `POST /v1/responses` (a subset of the OpenAI Responses API, LMSP section 6). */
export interface CreateResponseBody {
  model: string;
  input: string | Array<MessageInput | FunctionCallInput | FunctionCallOutputInput | ItemReferenceInput>;
  instructions?: string | null;
  previous_response_id?: string | null;
  max_output_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  seed?: number | null;
  stream?: boolean | null;
  background?: boolean | null;
  store?: boolean | null;
  metadata?: Record<string, string> | null;
  on_restart?: RestartPolicy | null;
  /** LMSP 6.1. */
  text?: { format?: TextFormatParam | null } | null;
  /** LMSP 6.2. */
  tools?: FunctionToolParam[] | null;
  tool_choice?: ToolChoiceParam | null;
  parallel_tool_calls?: boolean | null;
  truncation?: 'disabled' | 'auto' | null;
  /** OpenAI's extra output to include: checked, and none of it is produced but logprobs, which are refused. */
  include?: string[] | null;
  top_logprobs?: number | null;
  /** OpenAI's conversations and stored prompts: not supported, refused unless null. */
  conversation?: unknown;
  prompt?: unknown;
}

export type TextFormatParam =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict?: boolean | null; description?: string | null };

export interface FunctionToolParam {
  type: 'function';
  name: string;
  description?: string | null;
  parameters?: Record<string, unknown> | null;
  strict?: boolean | null;
}

/** LMSP 6.2: input items that carry a call and its result. */
export interface FunctionCallInput {
  type: 'function_call';
  call_id: string;
  name: string;
  arguments: string;
  id?: string | null;
  status?: InputItemStatusInput;
}

/** OpenAI's reference to an output item (a message, a function call) of a stored response, by its id. */
export interface ItemReferenceInput {
  /** As the `openai` package types it: absent or null too. */
  type?: 'item_reference' | null;
  id: string;
}

export interface FunctionCallOutputInput {
  type: 'function_call_output';
  call_id: string;
  /** A string, or (as OpenAI allows) text parts, which are joined. */
  output: string | Array<{ type: 'input_text'; text: string }>;
  id?: string | null;
  status?: InputItemStatusInput;
}
