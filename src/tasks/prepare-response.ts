/**
 * From a `POST /v1/responses` body to the records that make a response and its task (LMSP
 * section 6): defaults, the conversation with its previous responses, and the checks that need
 * the model (its context length). Nothing is written here.
 */
import type { CreateResponseBody, MessageInput } from '../api/types.js';
import { canSee, type Client } from '../domain/clients.js';
import { ServiceError, invalidRequest } from '../domain/errors.js';
import { promptMessages, type ChatMessage, type InputItem, type StoredResponse } from '../domain/responses.js';
import { checkCallsAnswered, conversationWith, itemStatus, normalizeInput, previousTurn } from './response-input.js';
import { isFinal, type RestartPolicy, type Task } from '../domain/tasks.js';
import { modelRefOf, type TokenCount } from '../engine/engine.js';
import { randomSeed } from '../engine/sampling.js';
import { newId } from '../ids.js';
import { nowSeconds } from '../time.js';
import type { TaskCore } from './core.js';
import { textFormatOf, toolingOf, toToolDefinition } from './response-format.js';
import { checkNoItemOfChain, isItemReference, outputMessageIdOf, referencedItem } from './item-reference.js';
import { newTask } from './new-task.js';

export const DEFAULT_MAX_OUTPUT_TOKENS = 1024;

/**
 * The output limit once the input's exact size is known: a limit that must fit beside the input
 * (`asked`: every response's, LMSP 6, and a chat completion's the client sent); a chat
 * completion's default, as OpenAI, shrinks to the room the input leaves (LMSP 13 is silent).
 * Null when nothing fits.
 */
export function outputLimitBeside(inputTokens: number, limit: number, asked: boolean, contextLength: number): number | null {
  if (inputTokens + limit <= contextLength) return limit;
  return !asked && inputTokens < contextLength ? contextLength - inputTokens : null;
}
/** A prompt's size for an error message: "1234 tokens", or "at least 1234 tokens" for a lower bound. */
export function tokensOf(count: TokenCount): string {
  return `${count.atLeast ? 'at least ' : ''}${count.tokens} tokens`;
}

/** Room for a chat template's own text around each message, in the quick upper bound below. */
const TEMPLATE_ALLOWANCE_PER_MESSAGE = 64;

function normalizeMessages(messages: MessageInput[]): InputItem[] {
  return messages.map((message) => ({
    id: message.id ?? newId('msg'),
    type: 'message',
    role: message.role,
    status: itemStatus(message.status),
    content: typeof message.content === 'string'
      ? [{ type: message.role === 'assistant' ? 'output_text' : 'input_text', text: message.content }]
      : message.content.map((part) => ({ type: part.type, text: part.text })),
  }));
}


/** A conversation cut at its start may begin with the outputs of calls left out: they go too. */
function withoutOrphanOutputs(context: ChatMessage[]): ChatMessage[] {
  let start = 0;
  while (start < context.length && context[start]!.role === 'tool') start += 1;
  return context.slice(start);
}

/**
 * OpenAI's `truncation: "auto"`: the conversation without the fewest oldest messages that makes
 * `fit` answer (null: it does not fit), found by a binary search over how many are left out
 * (fewer never fit when more do not); null when even the last message alone does not fit.
 */
async function fittingTail<T>(context: ChatMessage[], fit: (kept: ChatMessage[]) => Promise<T | null>): Promise<{ context: ChatMessage[]; fit: T } | null> {
  let low = 1;
  let high = context.length - 1;
  let best: { context: ChatMessage[]; fit: T } | null = null;
  while (low <= high) {
    const dropped = Math.floor((low + high) / 2);
    const kept = withoutOrphanOutputs(context.slice(dropped));
    const answer = kept.length === 0 ? null : await fit(kept);
    if (answer !== null) {
      best = { context: kept, fit: answer };
      high = dropped - 1;
    } else {
      low = dropped + 1;
    }
  }
  return best;
}

export interface PreparedResponse {
  response: StoredResponse;
  task: Task;
}

export async function prepareResponse(core: Pick<TaskCore, 'store' | 'registry' | 'engine'>, client: Client,
  body: CreateResponseBody): Promise<PreparedResponse> {
  const { store, registry, engine } = core;
  const model = registry.get(body.model);
  if (!model) throw new ServiceError('model_not_found', `The model '${body.model}' does not exist.`, { param: 'model' });
  const background = body.background ?? false;
  const stream = body.stream ?? false;
  const storeResponse = body.store ?? true;
  if (background && !storeResponse) throw invalidRequest('store', 'background responses must be stored: store cannot be false with background: true');
  // As Chat Completions' `logprobs: true`: asked for and not produced would be silently missing.
  const logprobsAt = body.include?.indexOf('message.output_text.logprobs') ?? -1;
  if (logprobsAt >= 0) throw invalidRequest(`include[${logprobsAt}]`, 'logprobs are not supported.');
  if ((body.top_logprobs ?? 0) > 0) throw invalidRequest('top_logprobs', 'logprobs are not supported: top_logprobs can only be 0.');
  // Both change what the model sees: ignored, they would answer without the context asked for.
  if (body.conversation !== undefined && body.conversation !== null) {
    throw invalidRequest('conversation', 'Conversations are not supported: continue with previous_response_id, or send the earlier messages in input.');
  }
  if (body.prompt !== undefined && body.prompt !== null) {
    throw invalidRequest('prompt', 'Stored prompts are not supported: send the instructions and input themselves.');
  }

  const textFormat = textFormatOf(body);
  const tooling = toolingOf(body, textFormat);

  let context: ChatMessage[] = [];
  let callsToAnswer: StoredResponse | null = null;
  if (body.previous_response_id) {
    const previous = store.responses.get(body.previous_response_id);
    if (!previous || !canSee(client, previous.clientId)) {
      throw new ServiceError('not_found', `Previous response with id '${body.previous_response_id}' not found.`, { param: 'previous_response_id' });
    }
    const previousTask = store.tasks.getByResponse(previous.id);
    if (!previousTask || !isFinal(previousTask.status)) {
      throw new ServiceError('response_not_finished', `Previous response '${previous.id}' has not finished yet.`, { param: 'previous_response_id' });
    }
    checkNoItemOfChain(store, previous, body.input);
    context = [...previous.context, previousTurn(previous)];
    if (previousTask.status === 'completed') callsToAnswer = previous;
  }
  const input = typeof body.input === 'string' ? body.input
    : body.input.map((item, index) => (isItemReference(item) ? referencedItem(store, client, item.id, index) : item));
  const inputItems = normalizeInput(input, normalizeMessages);
  context = conversationWith(context, inputItems);
  checkCallsAnswered(callsToAnswer, inputItems);

  const contextLength = model.contextLength ?? Number.MAX_SAFE_INTEGER;
  const asked = body.max_output_tokens ?? null;
  let maxOutputTokens = asked ?? Math.min(DEFAULT_MAX_OUTPUT_TOKENS, contextLength);
  if (maxOutputTokens > contextLength) {
    throw invalidRequest('max_output_tokens', `max_output_tokens must be at most the model's context length (${contextLength})`);
  }
  const instructions = body.instructions ?? null;
  const truncation = body.truncation ?? 'disabled';
  const messages = promptMessages({ instructions, context });
  // Every token covers at least one byte, so bytes plus the template's allowance bound the prompt
  // from above; only when that bound does not fit is the exact count asked of the engine. The
  // whole message counts (a call's arguments are rendered too), and so do the tools' definitions.
  const toolBytes = Buffer.byteLength(JSON.stringify(tooling.tools ?? []));
  const bound = messages.reduce((sum, message) => sum + Buffer.byteLength(JSON.stringify(message)) + TEMPLATE_ALLOWANCE_PER_MESSAGE,
    TEMPLATE_ALLOWANCE_PER_MESSAGE + toolBytes);
  if (bound + maxOutputTokens > contextLength) {
    const count = async (candidate: typeof messages): Promise<TokenCount | null> => {
      try {
        return await engine.countTokens(modelRefOf(model), candidate, tooling.tools?.map(toToolDefinition));
      } catch {
        // The engine cannot tell now (model unreadable, runner down): the task checks it again.
        return null;
      }
    };
    let input = await count(messages);
    // LMSP 6: the input plus max_output_tokens must fit, the default (1024) as much as a limit
    // the client sent. Only a model whose whole context is no larger than the default, where it
    // could never fit beside any input, gets the room the input leaves instead.
    const mustFit = asked !== null || contextLength > DEFAULT_MAX_OUTPUT_TOKENS;
    let fitted = input === null ? maxOutputTokens : outputLimitBeside(input.tokens, maxOutputTokens, mustFit, contextLength);
    if (fitted === null && truncation === 'auto') {
      const tail = await fittingTail(context, async (kept) => {
        const candidate = await count(promptMessages({ instructions, context: kept }));
        const room = candidate === null ? null : outputLimitBeside(candidate.tokens, maxOutputTokens, mustFit, contextLength);
        return room === null ? null : { count: candidate!, room };
      });
      if (tail) [context, input, fitted] = [tail.context, tail.fit.count, tail.fit.room];
    }
    if (fitted === null) {
      const size = tokensOf(input!);
      const what = asked === null && mustFit ? `The input (${size}) and the default max_output_tokens (${maxOutputTokens}) exceed`
        : asked === null ? `The input (${size}) leaves no room for output in`
        : `The input (${size}) and max_output_tokens (${maxOutputTokens}) exceed`;
      const hint = asked === null && mustFit && input!.tokens < contextLength ? ` Send a max_output_tokens of at most ${contextLength - input!.tokens}.` : '';
      const truncated = truncation === 'auto' ? ' With truncation: auto, even the last message alone does not fit.' : '';
      throw new ServiceError('context_length_exceeded', `${what} the context length of '${model.id}' (${contextLength} tokens).${hint}${truncated}`, { param: 'input' });
    }
    maxOutputTokens = fitted;
  }

  const createdAt = nowSeconds();
  const id = newId('resp');
  const response: StoredResponse = {
    id,
    clientId: client.id,
    model: model.id,
    createdAt,
    background,
    stream,
    store: storeResponse,
    instructions,
    previousResponseId: body.previous_response_id ?? null,
    maxOutputTokens,
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? 1,
    seed: body.seed ?? randomSeed(),
    metadata: body.metadata ?? {},
    inputItems,
    context,
    // Its message's id leads back to it (an item_reference names it).
    outputItemId: outputMessageIdOf(id),
    outputText: null,
    ...(textFormat ? { textFormat } : {}),
    ...tooling,
    truncation,
  };
  return { response, task: newResponseTask(response, body.on_restart ?? (background ? 'resume' : 'fail')) };
}

/** The task of a new response, queued, before its first event. */
export function newResponseTask(response: Pick<StoredResponse, 'id' | 'clientId' | 'model' | 'createdAt'>, onRestart: RestartPolicy): Task {
  return newTask({ kind: 'response', responseId: response.id, clientId: response.clientId, model: response.model, onRestart, createdAt: response.createdAt });
}
