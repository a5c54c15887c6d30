/** Domain types of tasks and responses, as the rest of the code sees them (camelCase). */
import type { TaskErrorCode } from '../api/errors.js';
import type { RestartPolicy, TaskStatus } from './states.js';

export type MessageRole = 'user' | 'assistant' | 'system' | 'developer';

/** One message of the conversation the model sees. */
export interface ChatMessage {
  role: MessageRole;
  content: string;
}

/** An input item as the client sent it, normalised to the OpenAI message item shape. */
export interface InputItem {
  id: string;
  type: 'message';
  role: MessageRole;
  status: 'completed';
  content: Array<{ type: 'input_text' | 'output_text'; text: string }>;
}

export type FinishReason = 'stop' | 'max_output_tokens';

export interface TaskError {
  code: TaskErrorCode;
  message: string;
}

export interface Task {
  seq: number;
  id: string;
  kind: 'response';
  responseId: string;
  clientId: string;
  model: string;
  status: TaskStatus;
  onRestart: RestartPolicy;
  attempt: number;
  restarts: number;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  lastSequenceNumber: number;
  /** Output of the current attempt lies in the events after this sequence number. */
  outputStartSeq: number;
  inputTokens: number | null;
  outputTokens: number;
  finishReason: FinishReason | null;
  error: TaskError | null;
}

/** The fields of a response that never change after it is created, all that views need. */
export type ResponseHeader = Omit<StoredResponse, 'inputItems' | 'context' | 'outputText'>;

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
  inputItems: InputItem[];
  /** Every message the model sees, previous responses included, instructions first. */
  context: ChatMessage[];
  outputItemId: string;
  /** Final text, set when the task finishes; while it runs the text lives in its delta events. */
  outputText: string | null;
}

/** Sampling parameters of one generation. */
export interface Sampling {
  temperature: number;
  topP: number;
  seed: number;
  maxOutputTokens: number;
}
