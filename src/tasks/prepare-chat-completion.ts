/**
 * From a `POST /v1/chat/completions` body to the records that make a chat completion and its task
 * (LMSP 13): defaults, the checks the request schema cannot make (roles and their fields, tool
 * calls and their results, `n`, stop sequences, schemas and tools the grammar can enforce), and
 * those that need the model (its context length). Nothing is written here.
 */
import type { ChatContentPart, ChatMessageInput, CreateChatCompletionBody } from '../api/chat-completions.js';
import type {
  ChatCompletionMessage, ChatCompletionRequest, ChatResponseFormat, ChatStoredPart, ChatTool, ChatToolChoice, StoredChatCompletion,
} from '../domain/chat-completions.js';
import type { Client } from '../domain/clients.js';
import { ServiceError, invalidRequest } from '../domain/errors.js';
import type { Task } from '../domain/tasks.js';
import { checkSchemaSupported, checkToolsSupported, formatBesideCalls } from '../engine/grammar/constraint.js';
import { modelRefOf, type TokenCount } from '../engine/engine.js';
import { randomSeed } from '../engine/sampling.js';
import { newChatCompletionId } from '../ids.js';
import { nowSeconds } from '../time.js';
import { generationOf } from './chat-completion-kind.js';
import type { TaskCore } from './core.js';
import { DEFAULT_MAX_OUTPUT_TOKENS, outputLimitBeside, tokensOf } from './prepare-response.js';
import { unsupportedSchema } from './response-format.js';
import { newTask } from './new-task.js';

/** Room for a chat template's own text around each message, in the quick upper bound below. */
const TEMPLATE_ALLOWANCE_PER_MESSAGE = 64;
/** LMSP 13: `stop` is a string or up to this many. */
export const MAX_STOP_SEQUENCES = 4;

/** The text of a content: a string, or text parts joined (an assistant's refusal parts count as text). */
function contentText(content: string | ChatContentPart[], param: string, role: ChatMessageInput['role']): string {
  if (typeof content === 'string') return content;
  return content.map((part, index) => {
    // A part of a known type without its text names the missing field, as OpenAI answers.
    const field = part.type === 'text' ? 'text' : role === 'assistant' && part.type === 'refusal' ? 'refusal' : null;
    if (field !== null && typeof part[field] !== 'string') {
      throw invalidRequest(`${param}[${index}].${field}`, `Missing required parameter: '${param}[${index}].${field}'.`);
    }
    if (part.type === 'text' && typeof part.text === 'string') return part.text;
    if (role === 'assistant' && part.type === 'refusal' && typeof part.refusal === 'string') return part.refusal;
    throw invalidRequest(`${param}[${index}].type`, `Only text content parts are supported; '${part.type}' is not.`);
  }).join('');
}

/** A content sent as parts, kept as they were (already checked by `contentText`). */
function partsOf(content: string | ChatContentPart[] | null | undefined): { contentParts?: ChatStoredPart[] } {
  if (!Array.isArray(content)) return {};
  return {
    contentParts: content.map((part): ChatStoredPart => (part.type === 'refusal' ? { type: 'refusal', refusal: part.refusal! } : { type: 'text', text: part.text! })),
  };
}

/**
 * As OpenAI answers: the tool messages right after an assistant message with `tool_calls` answer
 * those calls, each of them, and a tool message answers only a call of that message (LMSP 6.2).
 */
function unansweredCallsError(pending: ReadonlySet<string>, param: string): ServiceError {
  return invalidRequest(param, "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "
    + `The following tool_call_ids did not have response messages: ${[...pending].join(', ')}.`);
}

/** Each message in the domain's form, checked for the fields its role needs (LMSP 13). */
function normalizeMessages(messages: readonly ChatMessageInput[]): ChatCompletionMessage[] {
  /** The calls of the assistant message that the current run of tool messages answers. */
  let calls = new Set<string>();
  /** Those of them no tool message has answered yet. */
  let pending = new Set<string>();
  const normalized = messages.map((message, index): ChatCompletionMessage => {
    const param = `messages[${index}]`;
    const name = message.name !== undefined && message.name !== null ? { name: message.name } : {};
    if (message.role !== 'tool') {
      if (pending.size > 0) throw unansweredCallsError(pending, `${param}.role`);
      calls = new Set();
    }
    if (message.role === 'assistant') {
      const toolCalls = (message.tool_calls ?? []).map((call) => ({ id: call.id, name: call.function.name, arguments: call.function.arguments }));
      if ((message.content === undefined || message.content === null) && toolCalls.length === 0) {
        throw invalidRequest(`${param}.content`, `Missing required parameter: '${param}.content' (an assistant message needs content or tool_calls).`);
      }
      calls = new Set(toolCalls.map((call) => call.id));
      pending = new Set(calls);
      const content = message.content === undefined || message.content === null ? null : contentText(message.content, `${param}.content`, 'assistant');
      return { role: 'assistant', content, ...(toolCalls.length > 0 ? { toolCalls } : {}), ...name, ...partsOf(message.content) };
    }
    if (message.content === undefined || message.content === null) {
      throw invalidRequest(`${param}.content`, `Missing required parameter: '${param}.content'.`);
    }
    const content = contentText(message.content, `${param}.content`, message.role);
    const parts = partsOf(message.content);
    if (message.role === 'tool') {
      if (message.tool_call_id === undefined || message.tool_call_id === null) throw invalidRequest(`${param}.tool_call_id`, `Missing required parameter: '${param}.tool_call_id'.`);
      if (!calls.has(message.tool_call_id)) {
        throw invalidRequest(`${param}.tool_call_id`,
          `A tool message must answer a call of the assistant message before it; '${message.tool_call_id}' is not among its tool_calls.`);
      }
      pending.delete(message.tool_call_id);
      return { role: 'tool', content, toolCallId: message.tool_call_id, ...parts };
    }
    return { role: message.role, content, ...name, ...parts };
  });
  // The conversation cannot end on calls: the model would be asked to go on without their results.
  if (pending.size > 0) throw unansweredCallsError(pending, 'messages');
  return normalized;
}

function responseFormatOf(body: CreateChatCompletionBody): ChatResponseFormat {
  const format = body.response_format;
  if (!format || format.type === 'text') return { type: 'text' };
  if (format.type === 'json_object') return { type: 'json_object' };
  if (!format.json_schema) throw invalidRequest('response_format.json_schema', "Missing required parameter: 'response_format.json_schema'.");
  const schema = format.json_schema.schema ?? {};
  const support = checkSchemaSupported(schema);
  if (!support.ok) {
    throw unsupportedSchema('response_format.json_schema.schema', support);
  }
  return { type: 'json_schema', name: format.json_schema.name, schema, strict: format.json_schema.strict ?? null };
}

function toolsOf(body: CreateChatCompletionBody, format: ChatResponseFormat): ChatTool[] {
  const tools: ChatTool[] = (body.tools ?? []).map(({ function: fn }) => ({
    name: fn.name,
    ...(fn.description !== undefined && fn.description !== null ? { description: fn.description } : {}),
    ...(fn.parameters !== undefined && fn.parameters !== null ? { parameters: fn.parameters } : {}),
  }));
  const support = checkToolsSupported(tools, formatBesideCalls(body.tool_choice, format));
  if (!support.ok) {
    const at = `tools[${support.toolIndex ?? 0}].function`;
    if (support.keyword === 'name') throw invalidRequest(`${at}.name`, support.message);
    throw unsupportedSchema(`${at}.parameters`, support);
  }
  return tools;
}

function toolChoiceOf(body: CreateChatCompletionBody, tools: readonly ChatTool[]): ChatToolChoice | null {
  // As OpenAI answers Chat Completions (its Responses API accepts them): options of tools need tools.
  for (const field of ['tool_choice', 'parallel_tool_calls'] as const) {
    if (tools.length === 0 && body[field] !== undefined && body[field] !== null) {
      throw invalidRequest(field, `Invalid value for '${field}': '${field}' is only allowed when 'tools' are specified.`);
    }
  }
  const choice = body.tool_choice;
  if (choice === undefined || choice === null) return null;
  if (choice === 'none' || choice === 'auto' || choice === 'required') return choice;
  if (!tools.some((tool) => tool.name === choice.function.name)) {
    throw invalidRequest('tool_choice.function.name', `No tool named '${choice.function.name}' is in tools.`);
  }
  return { name: choice.function.name };
}

function stopOf(body: CreateChatCompletionBody): string[] {
  const stop = body.stop === undefined || body.stop === null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
  if (stop.length > MAX_STOP_SEQUENCES) throw invalidRequest('stop', `stop holds at most ${MAX_STOP_SEQUENCES} sequences.`);
  stop.forEach((sequence, index) => {
    if (sequence === '') throw invalidRequest(typeof body.stop === 'string' ? 'stop' : `stop[${index}]`, 'A stop sequence cannot be empty.');
  });
  return stop;
}

/** Tokens a `logit_bias` may name. */
const MAX_LOGIT_BIAS_TOKENS = 1024;

/**
 * OpenAI's `logit_bias`: keys are token ids written as non-negative decimal integers, values -100
 * to 100; refused as OpenAI refuses them. Biases of 0 change nothing and are left out.
 */
function logitBiasOf(body: CreateChatCompletionBody): Array<[number, number]> {
  if (body.logit_bias === undefined || body.logit_bias === null) return [];
  const entries = Object.entries(body.logit_bias);
  if (entries.length > MAX_LOGIT_BIAS_TOKENS) throw invalidRequest('logit_bias', `logit_bias names at most ${MAX_LOGIT_BIAS_TOKENS} tokens; it names ${entries.length}.`);
  const pairs: Array<[number, number]> = [];
  for (const [key, value] of entries) {
    if (!/^(0|[1-9][0-9]{0,9})$/.test(key) || Number(key) > 2 ** 31 - 1) {
      throw invalidRequest('logit_bias', `Invalid key in 'logit_bias': ${JSON.stringify(key)}. Keys are token ids, non-negative integers.`);
    }
    if (value < -100 || value > 100) {
      throw invalidRequest('logit_bias', `Invalid value for 'logit_bias' token ${key}: ${value}. A bias is from -100 to 100.`);
    }
    if (value !== 0) pairs.push([Number(key), value]);
  }
  return pairs.sort((a, b) => a[0] - b[0]);
}

export interface PreparedChatCompletion {
  completion: StoredChatCompletion;
  task: Task;
}

export async function prepareChatCompletion(core: Pick<TaskCore, 'registry' | 'engine'>, client: Client,
  body: CreateChatCompletionBody): Promise<PreparedChatCompletion> {
  const { registry, engine } = core;
  if (body.n !== undefined && body.n !== null && body.n !== 1) throw invalidRequest('n', 'Only n = 1 is supported.');
  if (body.logprobs === true) throw invalidRequest('logprobs', 'logprobs are not supported.');
  // As OpenAI answers: top_logprobs only means something with logprobs on, which LMSP refuses.
  if (body.top_logprobs !== undefined && body.top_logprobs !== null) {
    throw invalidRequest('top_logprobs', "The 'top_logprobs' parameter is only allowed when 'logprobs' is enabled, and logprobs are not supported.");
  }
  const messages = normalizeMessages(body.messages);
  const stop = stopOf(body);
  const logitBias = logitBiasOf(body);
  const responseFormat = responseFormatOf(body);
  const tools = toolsOf(body, responseFormat);
  const toolChoice = toolChoiceOf(body, tools);
  const model = registry.get(body.model);
  if (!model) throw new ServiceError('model_not_found', `The model '${body.model}' does not exist.`, { param: 'model' });

  const contextLength = model.contextLength ?? Number.MAX_SAFE_INTEGER;
  const asked = body.max_completion_tokens ?? body.max_tokens ?? null;
  const askedParam = body.max_completion_tokens !== undefined && body.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
  if (asked !== null && asked > contextLength) {
    throw invalidRequest(askedParam, `${askedParam} must be at most the model's context length (${contextLength})`);
  }
  const maxCompletionTokens = asked ?? Math.min(DEFAULT_MAX_OUTPUT_TOKENS, contextLength);
  const request: ChatCompletionRequest = {
    maxCompletionTokens,
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? 1,
    seed: body.seed ?? randomSeed(),
    frequencyPenalty: body.frequency_penalty ?? 0,
    presencePenalty: body.presence_penalty ?? 0,
    ...(logitBias.length > 0 ? { logitBias } : {}),
    stop,
    responseFormat,
    tools,
    toolChoice,
    parallelToolCalls: body.parallel_tool_calls ?? true,
  };
  const createdAt = nowSeconds();
  const stream = body.stream ?? false;
  const completion: StoredChatCompletion = {
    id: newChatCompletionId(),
    clientId: client.id,
    model: model.id,
    createdAt,
    stream,
    store: body.store ?? false,
    includeUsage: stream && (body.stream_options?.include_usage ?? false),
    systemFingerprint: `fp_${model.digest.replace(/^sha256:/, '').slice(0, 10)}`,
    metadata: body.metadata ?? {},
    request,
    messages,
    outputText: null,
    toolCalls: null,
  };

  // Every token covers at least one byte, so bytes plus the template's allowance bound the prompt
  // from above; only when that bound does not fit is the exact count asked of the engine.
  const plan = generationOf(completion);
  const toolBytes = Buffer.byteLength(JSON.stringify(tools));
  const bound = plan.messages.reduce((sum, message) => sum + Buffer.byteLength(JSON.stringify(message)) + TEMPLATE_ALLOWANCE_PER_MESSAGE,
    TEMPLATE_ALLOWANCE_PER_MESSAGE + toolBytes);
  if (bound + maxCompletionTokens > contextLength) {
    let count: TokenCount | null = null;
    try {
      count = await engine.countTokens(modelRefOf(model), plan.messages, plan.tools);
    } catch {
      // The engine cannot tell now (model unreadable, runner down): the task checks it again.
    }
    const fitted = count === null ? maxCompletionTokens : outputLimitBeside(count.tokens, maxCompletionTokens, asked !== null, contextLength);
    if (fitted === null) {
      // The message names only what the client sent: without a limit, the messages alone are at fault.
      const size = tokensOf(count!);
      const what = asked === null ? `The messages (${size}) leave no room for a completion in`
        : `The messages (${size}) and ${askedParam} (${maxCompletionTokens}) exceed`;
      throw new ServiceError('context_length_exceeded', `${what} the context length of '${model.id}' (${contextLength} tokens).`, { param: 'messages' });
    }
    request.maxCompletionTokens = fitted;
  }
  return { completion, task: newChatCompletionTask(completion, body.on_restart ?? 'fail') };
}

function newChatCompletionTask(completion: StoredChatCompletion, onRestart: Task['onRestart']): Task {
  return newTask({
    kind: 'chat_completion', completionId: completion.id, clientId: completion.clientId, model: completion.model, onRestart, createdAt: completion.createdAt,
  });
}
