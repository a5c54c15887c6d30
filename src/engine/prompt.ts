/**
 * Renders a conversation into tokens (LMSP 6.2 "Chat templates"): with the model's own Jinja
 * chat template when its GGUF has one (node-llama-cpp's JinjaTemplateChatWrapper, which renders
 * tools through the template when it knows them and tells how the model writes a call), else
 * with the fixed plain layout of plain-layout.ts. Either way the result says how calls are
 * written, for constrained decoding and for reading calls back.
 */
import {
  JinjaTemplateChatWrapper, LlamaText, resolveChatWrapper, SpecialToken, SpecialTokensText, type ChatHistoryItem, type ChatModelFunctionCall,
  type ChatModelFunctions, type ChatWrapper, type LlamaModel, type Token,
} from 'node-llama-cpp';
import type { ToolCallSyntax } from './grammar/constraint.js';
import { PLAIN_TOOL_CALL_SYNTAX, renderPlainLayout } from './plain-layout.js';
import type { EngineMessage, ToolDefinition } from './types.js';
import { tokensAtLeast } from './vocabulary.js';

export interface RenderedPrompt {
  tokens: Token[];
  /** Tokens that end the generation besides the model's end-of-generation tokens. */
  stopTokens: Set<Token>;
  /** How this model writes a tool call. */
  toolCallSyntax: ToolCallSyntax;
}

/** Tool results are JSON when they parse as JSON, text otherwise. */
function parseLoosely(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * node-llama-cpp's history keeps a call together with its result, so each tool message joins
 * the call it answers; one that answers no call is shown as a user message.
 */
export function toHistory(messages: readonly EngineMessage[], resultsAsSent = false): ChatHistoryItem[] {
  const results = new Map<string, string>();
  for (const message of messages) if (message.role === 'tool') results.set(message.toolCallId, message.content);
  const answered = new Set<string>();
  const history: ChatHistoryItem[] = [];
  // After tool results the model goes on with the turn that made the calls.
  let continuesTurn = false;
  for (const message of messages) {
    continuesTurn = message.role === 'tool' && answered.has(message.toolCallId);
    switch (message.role) {
      case 'assistant': {
        const response: Array<string | ChatModelFunctionCall> = message.content ? [message.content] : [];
        (message.toolCalls ?? []).forEach((call, index) => {
          answered.add(call.id);
          const result = results.get(call.id);
          response.push({ type: 'functionCall', name: call.name, params: parseLoosely(call.arguments),
            result: result === undefined ? undefined : resultsAsSent ? result : parseLoosely(result), startsNewChunk: index === 0 });
        });
        // After tool results the assistant goes on in the turn that made the calls, as node-llama-cpp
        // keeps it: a model item of its own would be joined to that turn with a blank line, which
        // the template would write at the start of this message ("\n\n<tool_call>...").
        const previous = history.at(-1);
        if (previous?.type === 'model' && typeof previous.response.at(-1) === 'object') previous.response.push(...response);
        else history.push({ type: 'model', response });
        break;
      }
      case 'tool':
        if (!answered.has(message.toolCallId)) history.push({ type: 'user', text: message.content });
        break;
      case 'user':
        history.push({ type: 'user', text: message.content });
        break;
      default:
        history.push({ type: 'system', text: message.content }); // system and developer
    }
  }
  if (!continuesTurn) history.push({ type: 'model', response: [] });
  return history;
}

function chatTemplateSource(model: LlamaModel): string | null {
  const template = model.fileInfo.metadata.tokenizer?.chat_template;
  return typeof template === 'string' && template.length > 0 ? template : null;
}

/** A model's chat template, and what lmsp works out about it once. */
interface ChatTemplate {
  wrapper: ChatWrapper;
  /** Tool results are handed to the template as the text the client sent. */
  resultsAsSent: boolean;
  /** The template writes message content through `tojson` (see quoteResultsForTojson). */
  contentToJson: boolean;
  /** What the template writes for `add_generation_prompt`, or null when it cannot be told. */
  generationPrompt: string | null;
  toolCallSyntax: ToolCallSyntax;
}

/** Building a Jinja wrapper runs the template many times: once per model is enough. */
const templates = new WeakMap<LlamaModel, ChatTemplate>();

function chatTemplateOf(model: LlamaModel, source: string): ChatTemplate {
  let template = templates.get(model);
  if (!template) {
    // The model's own template, rendered as it is; node-llama-cpp's look-alike wrappers are only
    // a fallback for templates it cannot run.
    const wrapper = resolveChatWrapper(model, { type: 'jinjaTemplate', warningLogs: false });
    const own = wrapper as Partial<JinjaInternals>;
    const resultsAsSent = wrapper instanceof JinjaTemplateChatWrapper && own._usingJinjaFunctionCallTemplate === true
      && typeof own._stringifyFunctionResult === 'boolean';
    // The template renders tool messages itself: their content is the text the client sent, as
    // Hugging Face and llama.cpp render it. node-llama-cpp would write a text result as a JSON
    // string ("\"sunny\"") and re-serialize a JSON one; results are handed over as sent instead.
    if (resultsAsSent) own._stringifyFunctionResult = false;
    template = {
      wrapper, resultsAsSent, contentToJson: CONTENT_TOJSON.test(source), generationPrompt: generationPromptOf(wrapper),
      toolCallSyntax: wrapperToolCallSyntax(wrapper),
    };
    templates.set(model, template);
  }
  return template;
}

/** What node-llama-cpp 3.21's Jinja wrapper (pinned) decides about a template's tool messages. */
interface JinjaInternals {
  _usingJinjaFunctionCallTemplate: boolean;
  _stringifyFunctionResult: boolean;
}

/** Text of a wrapper setting (plain text and special-token text), or null if it holds a special token. */
function settingText(value: unknown): string | null {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  const parts = LlamaText(value as Parameters<typeof LlamaText>[0]).values;
  let text = '';
  for (const part of parts) {
    if (typeof part === 'string') text += part;
    else if (part instanceof SpecialToken) return null;
    else text += part.value;
  }
  return text;
}

/** The call syntax a chat wrapper teaches the model, or the plain one if it cannot be written as text. */
function wrapperToolCallSyntax(wrapper: ChatWrapper): ToolCallSyntax {
  const functions = wrapper.settings.functions;
  const prefix = settingText(functions.call.prefix);
  const paramsPrefix = settingText(functions.call.paramsPrefix);
  const suffix = settingText(functions.call.suffix);
  const parallel = functions.parallelism?.call;
  const betweenCalls = parallel ? settingText(parallel.betweenCalls) : null;
  if (!prefix || paramsPrefix === null || suffix === null || (parallel && betweenCalls === null)) return PLAIN_TOOL_CALL_SYNTAX;
  return { prefix, paramsPrefix, suffix, betweenCalls };
}

function functionsOf(tools: readonly ToolDefinition[]): ChatModelFunctions | undefined {
  if (tools.length === 0) return undefined;
  return Object.fromEntries(tools.map((tool) => [tool.name, {
    ...(tool.description === undefined ? {} : { description: tool.description }),
    params: (tool.parameters ?? { type: 'object', properties: {} }) as never,
  }]));
}

interface JinjaRendering {
  _jinjaTemplate?: { render(context: Record<string, unknown>): string };
  reasoning?: boolean | null;
  additionalRenderParameters?: Record<string, unknown>;
}

/**
 * What a chat template writes for `add_generation_prompt` (the opening of the assistant's turn):
 * the difference between a one-message conversation rendered with and without it. Null when it
 * cannot be told (the template fails on that conversation, or the two renderings differ before
 * the end), and the prompt is then ended as node-llama-cpp ends it.
 */
function generationPromptOf(wrapper: ChatWrapper): string | null {
  const { _jinjaTemplate: template, reasoning, additionalRenderParameters } = wrapper as unknown as JinjaRendering;
  if (!(wrapper instanceof JinjaTemplateChatWrapper) || typeof template?.render !== 'function') return null;
  const render = (addGenerationPrompt: boolean) => template.render({
    ...additionalRenderParameters, messages: [{ role: 'user', content: 'Hi' }], bos_token: '', eos_token: '', eot_token: '',
    ...(reasoning === null || reasoning === undefined ? {} : { enable_thinking: reasoning }), add_generation_prompt: addGenerationPrompt,
  });
  try {
    const without = render(false);
    const withPrompt = render(true);
    return withPrompt.startsWith(without) ? withPrompt.slice(without.length) : null;
  } catch {
    return null;
  }
}

/** A template that writes a message's content through `tojson` (Llama 3.1's tool messages: `message.content | tojson`). */
const CONTENT_TOJSON = /content(?:'\])?\s*\|\s*tojson\b/;

/**
 * node-llama-cpp hands the template a stand-in for each message's content and puts the text in
 * its place afterwards, so a filter the template applies to the content acts on the stand-in.
 * For `tojson` on a tool result, as Llama 3.1's template writes it, Hugging Face and llama.cpp
 * render the result as a JSON string; here it would arrive between the quotes unescaped
 * (`"{"temp":20}"`, not JSON). A result the template quoted that way is escaped as tojson would.
 */
function quoteResultsForTojson(text: LlamaText, template: ChatTemplate, messages: readonly EngineMessage[]): LlamaText {
  if (!template.resultsAsSent || !template.contentToJson) return text;
  const results = new Set(messages.flatMap((message) => (message.role === 'tool' ? [message.content] : [])));
  const values = text.values;
  const quotedAt = (index: number, side: 'before' | 'after') => {
    const value = values[index];
    return value instanceof SpecialTokensText && (side === 'before' ? value.value.endsWith('"') : value.value.startsWith('"'));
  };
  let changed = false;
  const quoted = values.map((value, index) => {
    if (typeof value !== 'string' || !results.has(value) || !quotedAt(index - 1, 'before') || !quotedAt(index + 1, 'after')) return value;
    changed = true;
    return JSON.stringify(value).slice(1, -1);
  });
  return changed ? LlamaText(quoted) : text;
}

/**
 * A lower bound of a conversation's prompt in tokens: that of its longest text, of any role
 * (instructions, a tool's output, an assistant's turn are written as a user's is), a call's
 * arguments or a tool's definition included. A template that leaves a text out would make it no
 * bound; none that lmsp knows does, and a text longer than the whole context is refused as the
 * input it is.
 */
export function promptLowerBound(model: LlamaModel, messages: readonly EngineMessage[], tools: readonly ToolDefinition[] = []): number {
  // Every text the template writes whole: the messages, the arguments of the calls they hold, and
  // the tools' definitions (a description, the parameters' schema), any of which may be the long one.
  const texts = [
    ...messages.flatMap((message) => [message.content, ...('toolCalls' in message ? (message.toolCalls ?? []).map((call) => call.arguments) : [])]),
    ...tools.flatMap((tool) => [tool.description ?? '', JSON.stringify(tool.parameters ?? {})]),
  ];
  return texts.reduce((most, text) => Math.max(most, tokensAtLeast(model, text)), 0);
}

export function renderPrompt(model: LlamaModel, messages: readonly EngineMessage[], tools: readonly ToolDefinition[] = []): RenderedPrompt {
  const source = chatTemplateSource(model);
  if (source !== null) {
    const template = chatTemplateOf(model, source);
    const { wrapper } = template;
    const history = toHistory(messages, template.resultsAsSent);
    const availableFunctions = functionsOf(tools);
    const state = wrapper.generateContextState({ chatHistory: history, availableFunctions });
    const stopTokens = new Set<Token>();
    for (const trigger of state.stopGenerationTriggers) {
      const tokens = LlamaText(trigger).tokenize(model.tokenizer, 'trimLeadingSpace');
      if (tokens.length === 1) stopTokens.add(tokens[0]!);
    }
    // node-llama-cpp ends a new turn's prompt with the template's rendering of an empty assistant
    // message, cut where its text would go; Hugging Face and llama.cpp end it with what the
    // template writes for `add_generation_prompt`. They differ where the template writes more for
    // an assistant message than to open one: Qwen3's empty thinking block (which turns thinking
    // off), Mistral's space before the text, DeepSeek R1's `<think>` opened for the model.
    const last = history.at(-1);
    const opening = last?.type === 'model' && last.response.length === 0 ? template.generationPrompt : null;
    const rendered = opening === null ? state.contextText
      : LlamaText([wrapper.generateContextState({ chatHistory: history.slice(0, -1), availableFunctions }).contextText, new SpecialTokensText(opening)]);
    const contextText = quoteResultsForTojson(rendered, template, messages);
    const tokens = contextText.tokenize(model.tokenizer);
    // As llama.cpp does: one BOS when the model asks for it and the template wrote none.
    const bos = model.tokens.bos;
    if (model.tokens.shouldPrependBosToken && bos !== null && tokens[0] !== bos) tokens.unshift(bos);
    return { tokens, stopTokens, toolCallSyntax: template.toolCallSyntax };
  }
  const text = renderPlainLayout(messages, tools);
  const parts = model.tokens.shouldPrependBosToken ? [new SpecialToken('BOS'), text] : [text];
  return { tokens: LlamaText(parts).tokenize(model.tokenizer), stopTokens: new Set(), toolCallSyntax: PLAIN_TOOL_CALL_SYNTAX };
}
