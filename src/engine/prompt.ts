/**
 * Renders a conversation into tokens: with the model's own chat template when its GGUF has one
 * (through node-llama-cpp's chat wrappers), else with a plain "Role: text" layout.
 */
import { LlamaText, resolveChatWrapper, SpecialToken, type ChatHistoryItem, type LlamaModel, type Token } from 'node-llama-cpp';
import type { PromptMessage } from './engine.js';

export interface RenderedPrompt {
  tokens: Token[];
  /** Tokens that end the generation besides the model's end-of-generation tokens. */
  stopTokens: Set<Token>;
}

function toHistory(messages: readonly PromptMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = messages.map((message): ChatHistoryItem => {
    if (message.role === 'assistant') return { type: 'model', response: [message.content] };
    if (message.role === 'user') return { type: 'user', text: message.content };
    return { type: 'system', text: message.content }; // system and developer
  });
  history.push({ type: 'model', response: [] });
  return history;
}

const ROLE_LABELS = { system: 'System', developer: 'System', user: 'User', assistant: 'Assistant' } as const;

export function hasChatTemplate(model: LlamaModel): boolean {
  const template = model.fileInfo.metadata.tokenizer?.chat_template;
  return typeof template === 'string' && template.length > 0;
}

export function renderPrompt(model: LlamaModel, messages: readonly PromptMessage[]): RenderedPrompt {
  if (hasChatTemplate(model)) {
    const wrapper = resolveChatWrapper(model, { warningLogs: false });
    if (wrapper) {
      const state = wrapper.generateContextState({ chatHistory: toHistory(messages) });
      const stopTokens = new Set<Token>();
      for (const trigger of state.stopGenerationTriggers) {
        const tokens = LlamaText(trigger).tokenize(model.tokenizer, 'trimLeadingSpace');
        if (tokens.length === 1) stopTokens.add(tokens[0]!);
      }
      return { tokens: state.contextText.tokenize(model.tokenizer), stopTokens };
    }
  }
  const body = messages.map((message) => `${ROLE_LABELS[message.role]}: ${message.content}`).join('\n');
  const text = `${body}\n${ROLE_LABELS.assistant}:`;
  const parts = model.tokens.shouldPrependBosToken ? [new SpecialToken('BOS'), text] : [text];
  return { tokens: LlamaText(parts).tokenize(model.tokenizer), stopTokens: new Set() };
}
