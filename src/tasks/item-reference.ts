/**
 * OpenAI's `item_reference` input item (LMSP 6 is silent; decided as OpenAI does): an output item
 * of a stored response, its message or one of its function calls, named by its id instead of sent
 * again. The AI SDK's Responses provider sends the assistant's earlier turns this way whenever
 * `store` is on, its default; the `openai` package types it `{id, type?: "item_reference" | null}`.
 * A message's id is its response's with `msg_` for `resp_`, so it leads straight to its response;
 * a function call's, or a message's of a response made before ids were paired so, is looked for
 * among the newest responses.
 */
import type { CreateResponseBody, FunctionCallInput, ItemReferenceInput, MessageInput, ResponseOutputItem } from '../api/types.js';
import { finishedToolItems, toResponseObject } from '../api/views.js';
import { canSee, type Client } from '../domain/clients.js';
import { ServiceError, invalidRequest } from '../domain/errors.js';
import type { StoredResponse } from '../domain/responses.js';
import { isFinal } from '../domain/tasks.js';
import type { Store } from '../store/index.js';
import { hasTools } from './response-kind.js';

const RESPONSE_PREFIX = 'resp_';
const MESSAGE_PREFIX = 'msg_';
/** How many of the newest responses an id no key leads to is looked for in. */
const RECENT_RESPONSES = 1000;

type InputItemParam = Exclude<CreateResponseBody['input'], string>[number];

/** The id of the output message of the response with this id. */
export function outputMessageIdOf(responseId: string): string {
  return `${MESSAGE_PREFIX}${responseId.slice(RESPONSE_PREFIX.length)}`;
}

/** An item reference: typed so, or (as the `openai` package allows) an item with an id, no role and no type. */
export function isItemReference(item: InputItemParam): item is ItemReferenceInput {
  return item.type === 'item_reference' || (item.type == null && !('role' in item) && typeof item.id === 'string');
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
 * The item `input[index]` refers to, as the client would have sent it, status included: 404
 * `not_found` when no stored response this client can see has it in its output (as OpenAI
 * answers a reference to an item it does not keep: a `store: false` response's, a message never
 * written because its task failed or was cancelled before it ran, or held only calls), 409
 * `response_not_finished` while its response runs (its output is not final yet).
 */
export function referencedItem(store: Store, client: Client, id: string, index: number): MessageInput | FunctionCallInput {
  const param = `input[${index}].id`;
  const notFound = (why = '') => new ServiceError('not_found', `Item with id '${id}' not found.${why}`, { param });
  const response = responseWithItem(store, id);
  if (!response || !canSee(client, response.clientId)) throw notFound();
  if (!response.store) throw notFound(' Items of responses made with store: false are not kept.');
  const task = store.tasks.getByResponse(response.id);
  if (!task) throw notFound();
  if (!isFinal(task.status)) {
    throw new ServiceError('response_not_finished', `Item '${id}' belongs to the response '${response.id}', which has not finished yet.`, { param });
  }
  // The output exactly as GET shows it.
  const text = response.outputText ?? '';
  const output = toResponseObject(response, task, text, hasTools(response) ? finishedToolItems(response, task, text, response.outputCalls ?? []) : undefined).output;
  const item = (output as ResponseOutputItem[]).find((each) => each.id === id);
  if (!item) throw notFound();
  // A finished response's items are never in progress.
  const status = item.status === 'incomplete' ? 'incomplete' : 'completed';
  if (item.type === 'function_call') return { type: 'function_call', id, call_id: item.call_id, name: item.name, arguments: item.arguments, status };
  return { type: 'message', role: 'assistant', id, status, content: [{ type: 'output_text', text: item.content.map((part) => part.text).join('') }] };
}

/** Every id of an item in the conversation up to `previous`: its inputs and outputs, and theirs before. */
function idsInChain(store: Store, previous: StoredResponse): Set<string> {
  const ids = new Set<string>();
  const seen = new Set<string>();
  for (let response: StoredResponse | null = previous; response && !seen.has(response.id);
    response = response.previousResponseId ? store.responses.get(response.previousResponseId) : null) {
    seen.add(response.id);
    for (const item of response.inputItems) ids.add(item.id);
    ids.add(response.outputItemId);
    for (const call of response.outputCalls ?? []) ids.add(call.id);
  }
  return ids;
}

/**
 * As OpenAI: an item given again, by reference or in full, that the conversation continued with
 * `previous_response_id` already holds is 400 "Duplicate item found", not a second copy of it
 * before the model. Read only when the input names ids.
 */
export function checkNoItemOfChain(store: Store, previous: StoredResponse, input: CreateResponseBody['input']): void {
  if (typeof input === 'string' || !input.some((item) => typeof item.id === 'string')) return;
  const ids = idsInChain(store, previous);
  input.forEach((item, index) => {
    if (typeof item.id === 'string' && ids.has(item.id)) {
      throw invalidRequest(`input[${index}].id`, `Duplicate item found with id ${item.id}. Remove duplicate items from your input and try again.`);
    }
  });
}
