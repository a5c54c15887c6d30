/**
 * What the dashboard reads from the service, as any client would read it: the fields of LMSP 1.0
 * it shows, tolerant of kinds, statuses and fields it does not know (a newer service may have
 * more), so that an unknown value is shown as it is instead of breaking the page.
 */

export type TaskStatus = 'queued' | 'loading' | 'running' | 'cancelling' | 'completed' | 'failed' | 'cancelled';

export const TASK_STATUSES: readonly TaskStatus[] = ['queued', 'loading', 'running', 'cancelling', 'completed', 'failed', 'cancelled'];
export const UNFINISHED: readonly TaskStatus[] = ['queued', 'loading', 'running', 'cancelling'];

export const SCOPES = ['responses', 'models:read', 'models:write', 'admin', 'metrics'] as const;
export type Scope = (typeof SCOPES)[number];

export interface WireError {
  code: string | null;
  message: string;
}

export interface Task {
  id: string;
  kind: string;
  response_id?: string | null;
  client_id: string;
  model: string;
  status: TaskStatus;
  on_restart: string;
  attempt: number;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  last_sequence_number: number;
  error: WireError | null;
}

export interface TaskEvent {
  type: string;
  sequence_number: number;
  created_at: number;
  [payload: string]: unknown;
}

export interface List<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  first_id?: string | null;
  last_id?: string | null;
}

export interface Client {
  id: string;
  name: string;
  scopes: string[];
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

export interface PairedClient extends Client {
  token: string;
}

export interface PairingCode {
  code: string;
  name: string | null;
  scopes: string[];
  expires_at: number;
}

export interface Service {
  id: string;
  name: string;
  protocol: string;
  protocol_version: string;
  software: { name: string; version: string };
  capabilities: Record<string, boolean | undefined>;
}

export interface Model {
  id: string;
  created: number;
  digest: string;
  size_bytes: number;
  architecture: string | null;
  context_length: number | null;
  parameters: number | null;
  quantization: string | null;
  status: string;
  loaded: boolean;
  path?: string;
}

export interface OutputItem {
  type: string;
  id?: string;
  status?: string;
  content?: Array<{ type: string; text?: string }>;
  name?: string;
  arguments?: string;
}

export interface Response {
  id: string;
  created_at: number;
  status: string;
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
  output: OutputItem[];
  usage: { input_tokens: number; output_tokens: number; total_tokens: number } | null;
  error: WireError | null;
  task: { id: string; status: TaskStatus; attempt: number } | null;
}

export interface InputMessage {
  id?: string;
  role: string;
  content: Array<{ type: string; text?: string }> | string;
}

export interface ChatCompletion {
  id: string;
  created: number;
  model: string;
  choices: Array<{ index: number; finish_reason: string | null; message: { role: string; content: string | null } }>;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  metadata?: Record<string, string> | null;
}

export interface ChatMessage {
  id?: string;
  role: string;
  content: string | null;
}

/** The text of an output (a response's message parts, joined). */
export function outputText(output: OutputItem[] | undefined): string {
  return (output ?? []).flatMap((item) => item.content ?? []).map((part) => part.text ?? '').join('');
}

export function messageText(content: InputMessage['content'] | null): string {
  if (content === null || content === undefined) return ''; // function_call items have no content
  return typeof content === 'string' ? content : content.map((part) => part.text ?? '').join('');
}

/** Terminal events of every task kind (LMSP 7.3, 13, 5.1): nothing follows them in a log. */
export function isTerminalEvent(type: string): boolean {
  return /^(response|chat\.completion|model\.pull)\.(completed|incomplete|failed|cancelled)$/.test(type);
}

export function isUnfinished(status: string): boolean {
  return (UNFINISHED as readonly string[]).includes(status);
}
