/**
 * LMSP 6.2: the input items that continue a conversation with tools. A `function_call` item is a
 * call the assistant made, a `function_call_output` item its result; both reach the model through
 * its chat template, as an assistant message with calls and a tool message. A previous response
 * carries its own calls into the next one (`previous_response_id`).
 */
import type { FunctionCallInput, FunctionCallOutputInput, InputItemStatusInput, MessageInput } from '../api/types.js';
import { invalidRequest } from '../domain/errors.js';
import type { ChatMessage, InputItem, InputItemStatus, ResponseInputItem, StoredResponse } from '../domain/responses.js';
import { randomBase62 } from '../ids.js';

type Input = MessageInput | FunctionCallInput | FunctionCallOutputInput;

function itemId(prefix: 'fc' | 'fco'): string {
  return `${prefix}_${randomBase62(24)}`;
}

/** An item's status as sent; `completed` when absent. */
export function itemStatus(status: InputItemStatusInput | undefined): InputItemStatus {
  return status ?? 'completed';
}

/**
 * The request's input as stored items; messages go through `normalizeMessages`, in order. Ids
 * the client gave are kept, so two items with the same one are refused, as OpenAI does: the
 * response's `input_items` are paged by id.
 */
export function normalizeInput(input: string | Input[], normalizeMessages: (messages: MessageInput[]) => InputItem[]): ResponseInputItem[] {
  const items: Input[] = typeof input === 'string' ? [{ role: 'user', content: input }] : input;
  const seen = new Set<string>();
  items.forEach((item, index) => {
    if (item.id == null) return;
    if (seen.has(item.id)) throw invalidRequest(`input[${index}].id`, `Duplicate item found with id ${item.id}.`);
    seen.add(item.id);
  });
  return items.map((item): ResponseInputItem => {
    if (item.type === 'function_call') {
      return { id: item.id ?? itemId('fc'), type: 'function_call', call_id: item.call_id, name: item.name, arguments: item.arguments, status: itemStatus(item.status) };
    }
    if (item.type === 'function_call_output') {
      const output = typeof item.output === 'string' ? item.output : item.output.map((part) => part.text).join('');
      return { id: item.id ?? itemId('fco'), type: 'function_call_output', call_id: item.call_id, output, status: itemStatus(item.status) };
    }
    return normalizeMessages([item])[0]!;
  });
}

/** The assistant's turn of a previous response: its text and the calls it made. */
export function previousTurn(previous: Pick<StoredResponse, 'outputText' | 'outputCalls'>): ChatMessage {
  const calls = (previous.outputCalls ?? []).map((call) => ({ id: call.callId, name: call.name, arguments: call.arguments }));
  return { role: 'assistant', content: previous.outputText ?? '', ...(calls.length > 0 ? { toolCalls: calls } : {}) };
}

function callIdsOf(messages: readonly ChatMessage[]): Set<string> {
  const ids = new Set<string>();
  for (const message of messages) {
    if ('toolCalls' in message) for (const call of message.toolCalls ?? []) ids.add(call.id);
  }
  return ids;
}

/**
 * The conversation after `items`: messages as they are, calls joined to the assistant message
 * before them (or a new one), outputs as tool messages. An output whose `call_id` matches no call
 * of the conversation is a 400 naming it.
 */
export function conversationWith(context: readonly ChatMessage[], items: readonly ResponseInputItem[]): ChatMessage[] {
  const messages: ChatMessage[] = [...context];
  const callIds = callIdsOf(context);
  items.forEach((item, index) => {
    switch (item.type) {
      case 'message':
        messages.push({ role: item.role, content: item.content.map((part) => part.text).join('') });
        break;
      case 'function_call': {
        const call = { id: item.call_id, name: item.name, arguments: item.arguments };
        const last = messages.at(-1);
        if (last && last.role === 'assistant' && 'content' in last) messages[messages.length - 1] = { ...last, toolCalls: [...(last.toolCalls ?? []), call] };
        else messages.push({ role: 'assistant', content: '', toolCalls: [call] });
        callIds.add(item.call_id);
        break;
      }
      case 'function_call_output':
        if (!callIds.has(item.call_id)) {
          throw invalidRequest(`input[${index}].call_id`, `No tool call found for function call output with call_id ${item.call_id}.`);
        }
        messages.push({ role: 'tool', toolCallId: item.call_id, content: item.output });
        break;
    }
  });
  return messages;
}

/**
 * As OpenAI: every call the conversation hands to the model must be answered by a
 * `function_call_output` in the input (400 naming `input`, `No tool output found for function
 * call ...`, otherwise): the calls a finished previous response made, and the `function_call`
 * items of the input itself. Calls cut short (`incomplete`) need none.
 */
export function checkCallsAnswered(previous: Pick<StoredResponse, 'outputCalls'> | null, items: readonly ResponseInputItem[]): void {
  const answered = new Set(items.flatMap((item) => (item.type === 'function_call_output' ? [item.call_id] : [])));
  const missing = (previous?.outputCalls ?? []).find((call) => call.status === 'completed' && !answered.has(call.callId))?.callId
    ?? items.flatMap((item) => (item.type === 'function_call' && !answered.has(item.call_id) ? [item.call_id] : []))[0];
  if (missing !== undefined) throw invalidRequest('input', `No tool output found for function call ${missing}.`);
}
