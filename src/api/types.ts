/**
 * Wire types of LMSP 1.0: what clients send and receive.
 *
 * Glossary
 * - task: the durable unit of work behind a response (`task_...`), with a status (LMSP 7.2) and
 *   a restart policy (`on_restart`, LMSP 7.5).
 * - attempt: one run of a task from the start; a `retry` after a restart begins attempt + 1 and
 *   drops the earlier output, a `resume` continues the same attempt.
 * - event: one entry of a task's log (`response.created`, deltas, ...), numbered per task from 1
 *   without gaps (`sequence_number`); a stream is a replay of the log followed live.
 * - snapshot: what a `resume` continues from: the token ids stored with each delta event, in the
 *   same transaction as the text they produced.
 * - client: a paired app, agent or script (`cli_...`), known by the SHA-256 of its token.
 * - scope: what a client may do: `responses`, `models:read`, `models:write`, `admin`, `metrics`.
 */
import type { ResponseStatus, RestartPolicy, TaskStatus } from '../tasks/states.js';
import type { InputItem, MessageRole } from '../tasks/types.js';

export type { ErrorBody } from './errors.js';

export interface OutputText {
  type: 'output_text';
  text: string;
  annotations: [];
}

export interface OutputMessage {
  type: 'message';
  id: string;
  role: 'assistant';
  status: 'in_progress' | 'completed' | 'incomplete';
  content: OutputText[];
}

export interface ResponseTaskSummary {
  id: string;
  status: TaskStatus;
  on_restart: RestartPolicy;
  attempt: number;
  last_sequence_number: number;
}

export interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponseStatus;
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
  output: OutputMessage[];
  usage: { input_tokens: number; output_tokens: number; total_tokens: number } | null;
  error: { code: string; message: string } | null;
  incomplete_details: { reason: 'max_output_tokens' } | null;
  task: ResponseTaskSummary;
}

export interface TaskObject {
  id: string;
  object: 'task';
  kind: 'response';
  response_id: string;
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

export interface InputItemList extends ListObject<InputItem> {
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
  capabilities: { background: boolean; stream: boolean; resume: boolean; idempotency: boolean };
}

export type ModelStatus = 'ready' | 'missing' | 'digest_mismatch';

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

export interface MessageInput {
  role: MessageRole;
  content: string | Array<{ type: 'input_text' | 'output_text'; text: string }>;
  type?: 'message';
}

/** The body of `POST /v1/responses` (a subset of the OpenAI Responses API, LMSP section 6). */
export interface CreateResponseBody {
  model: string;
  input: string | MessageInput[];
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
}
