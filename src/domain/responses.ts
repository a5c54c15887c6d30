/** Responses as the service stores them (LMSP section 6), in the domain's words (camelCase). */

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
  /** Every message the model sees, previous responses included (the instructions are kept apart). */
  context: ChatMessage[];
  outputItemId: string;
  /** Final text, set when the task finishes; while it runs the text lives in its delta events. */
  outputText: string | null;
}

/** The fields of a response that never change after it is created: all that views need. */
export type ResponseHeader = Omit<StoredResponse, 'inputItems' | 'context' | 'outputText'>;

/** The messages the model sees: the instructions first, then the conversation. */
export function promptMessages(response: Pick<StoredResponse, 'instructions' | 'context'>): ChatMessage[] {
  return response.instructions ? [{ role: 'system', content: response.instructions }, ...response.context] : response.context;
}
