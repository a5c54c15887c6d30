/**
 * OpenAI's `item_reference` input item (LMSP 6 is silent; decided as OpenAI does): an output item
 * of a stored response, its message or one of its function calls, named by its id instead of sent
 * again. The AI SDK's Responses provider sends the assistant's earlier turns this way whenever
 * `store` is on, its default. A message's id is its response's with `msg_` for `resp_`, so it
 * leads straight to its response; a function call's, or a message's of a response made before
 * ids were paired so, is looked for among the newest responses.
 */
import type { FunctionCallInput, MessageInput } from '../api/types.js';
import { canSee, type Client } from '../domain/clients.js';
import { ServiceError } from '../domain/errors.js';
import type { StoredResponse } from '../domain/responses.js';
import { isFinal } from '../domain/tasks.js';
import type { Store } from '../store/index.js';

const RESPONSE_PREFIX = 'resp_';
const MESSAGE_PREFIX = 'msg_';
/** How many of the newest responses an id no key leads to is looked for in. */
const RECENT_RESPONSES = 1000;

/** The id of the output message of the response with this id. */
export function outputMessageIdOf(responseId: string): string {
  return `${MESSAGE_PREFIX}${responseId.slice(RESPONSE_PREFIX.length)}`;
}

function responseWithItem(store: Store, id: string): StoredResponse | null {
  if (id.startsWith(MESSAGE_PREFIX)) {
    const response = store.responses.get(`${RESPONSE_PREFIX}${id.slice(MESSAGE_PREFIX.length)}`);
    if (response?.outputItemId === id) return response;
  }
  for (const candidate of store.responses.recentWithItem(id, RECENT_RESPONSES)) {
    const response = store.responses.get(candidate);
    if (response && (response.outputItemId === id || response.outputCalls?.some((call) => call.id === id))) return response;
  }
  return null;
}

/**
 * The item `input[index]` refers to, as the client would have sent it: 404 `not_found` when no
 * response this client can see has it (as OpenAI answers a reference to an item it does not
 * keep), 409 `response_not_finished` while its response runs (its output is not final yet).
 */
export function referencedItem(store: Store, client: Client, id: string, index: number): MessageInput | FunctionCallInput {
  const param = `input[${index}].id`;
  const response = responseWithItem(store, id);
  if (!response || !canSee(client, response.clientId)) {
    throw new ServiceError('not_found', `Item with id '${id}' not found. Items of responses made with store: false are not kept.`, { param });
  }
  const task = store.tasks.getByResponse(response.id);
  if (!task || !isFinal(task.status)) {
    throw new ServiceError('response_not_finished', `Item '${id}' belongs to the response '${response.id}', which has not finished yet.`, { param });
  }
  const call = response.outputCalls?.find((each) => each.id === id);
  if (call) return { type: 'function_call', id, call_id: call.callId, name: call.name, arguments: call.arguments, status: call.status };
  return { type: 'message', role: 'assistant', id, content: [{ type: 'output_text', text: response.outputText ?? '' }] };
}
