/**
 * The requests a run sends: a fixed set of shapes, the create body of each, and the text an
 * uninterrupted run of each gives (the reference every completed seeded task is held to).
 */
import { rmSync } from 'node:fs';
import type { ChatCompletionObject, CreateChatCompletionBody } from '../../src/api/chat-completions.js';
import type { CreateResponseBody, ResponseObject } from '../../src/api/types.js';
import { makeDataDir } from '../../test/helpers/data-dir.js';
import { api } from '../../test/helpers/service.js';
import { startWithRetry } from './processes.js';

/**
 * The request shapes every create uses: a small fixed set, so that the text of an uninterrupted
 * run of each (the reference) costs one plain request. The model is deterministic given the
 * request, so any completed task with the shape's seed must end with exactly that text.
 */
interface Shape {
  input: CreateResponseBody['input'];
  instructions?: string;
  seed: number;
  temperature: number;
  top_p: number;
  max_output_tokens: number;
}

export const SHAPES: readonly Shape[] = [
  { input: 'Tell me about lighthouses.', seed: 1, temperature: 1, top_p: 1, max_output_tokens: 5 },
  { input: 'Count to ten, slowly.', seed: 42, temperature: 0.7, top_p: 0.9, max_output_tokens: 40 },
  {
    input: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello! How can I help?' }, { role: 'user', content: 'Go on.' }],
    instructions: 'You are terse.', seed: 7, temperature: 1.3, top_p: 0.95, max_output_tokens: 120,
  },
  { input: 'Greedy, please.', seed: 3, temperature: 0, top_p: 1, max_output_tokens: 200 },
  { input: 'Once upon a time', seed: 99, temperature: 0.9, top_p: 0.5, max_output_tokens: 80 },
  { input: 'Write anything at all.', seed: 123456789, temperature: 2, top_p: 1, max_output_tokens: 150 },
  { input: 'A short one.', instructions: 'Answer in French.', seed: -5, temperature: 1, top_p: 0.8, max_output_tokens: 12 },
  { input: 'The longest shape.', seed: 2024, temperature: 1.1, top_p: 0.97, max_output_tokens: 200 },
];

export const MODEL = 'lmsp-tiny';

/** The Chat Completions shapes (LMSP 13): the same core, another template, other texts. */
interface ChatShape {
  messages: CreateChatCompletionBody['messages'];
  seed: number;
  temperature: number;
  top_p: number;
  max_completion_tokens: number;
}

export const CHAT_SHAPES: readonly ChatShape[] = [
  { messages: [{ role: 'user', content: 'Say something.' }], seed: 11, temperature: 1, top_p: 1, max_completion_tokens: 8 },
  {
    messages: [{ role: 'system', content: 'You are brief.' }, { role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' }, { role: 'user', content: 'More.' }],
    seed: 5, temperature: 0.8, top_p: 0.9, max_completion_tokens: 40,
  },
  { messages: [{ role: 'developer', content: 'Greedy.' }, { role: 'user', content: [{ type: 'text', text: 'A list, please.' }] }], seed: 8, temperature: 0, top_p: 1, max_completion_tokens: 120 },
  { messages: [{ role: 'user', content: 'Go on for a while.' }], seed: 31337, temperature: 1.2, top_p: 0.95, max_completion_tokens: 160 },
];

export function chatBodyOf(shape: ChatShape, seeded: boolean): CreateChatCompletionBody {
  const body: CreateChatCompletionBody = {
    model: MODEL, messages: shape.messages, temperature: shape.temperature, top_p: shape.top_p, max_completion_tokens: shape.max_completion_tokens,
  };
  if (seeded) body.seed = shape.seed;
  return body;
}

export function chatTextOf(completion: ChatCompletionObject): string {
  return completion.choices[0]?.message.content ?? '';
}

export interface References {
  /** The text of an uninterrupted run of each of SHAPES. */
  responses: string[];
  /** The same for CHAT_SHAPES. */
  chat: string[];
}

export function bodyOf(shape: Shape, seeded: boolean): CreateResponseBody {
  const body: CreateResponseBody = {
    model: MODEL, input: shape.input, temperature: shape.temperature, top_p: shape.top_p, max_output_tokens: shape.max_output_tokens,
  };
  if (shape.instructions) body.instructions = shape.instructions;
  if (seeded) body.seed = shape.seed;
  return body;
}

/** The text of an uninterrupted run of every shape, from plain requests on a service never killed. */
export async function referenceTexts(log: (line: string) => void = () => {}): Promise<References> {
  const service = await startWithRetry({ dataDir: makeDataDir('torture-reference') });
  try {
    const texts: string[] = [];
    for (const shape of SHAPES) {
      const answer = await api(service, '/v1/responses', { method: 'POST', json: bodyOf(shape, true), signal: AbortSignal.timeout(60_000) });
      if (answer.status !== 200) throw new Error(`reference request answered ${answer.status}: ${await answer.text()}`);
      const response = (await answer.json()) as ResponseObject;
      if (response.task.status !== 'completed') throw new Error(`reference response ended ${response.task.status}`);
      texts.push(textOf(response));
    }
    const chat: string[] = [];
    for (const shape of CHAT_SHAPES) {
      const answer = await api(service, '/v1/chat/completions', { method: 'POST', json: chatBodyOf(shape, true), signal: AbortSignal.timeout(60_000) });
      if (answer.status !== 200) throw new Error(`reference chat completion answered ${answer.status}: ${await answer.text()}`);
      chat.push(chatTextOf((await answer.json()) as ChatCompletionObject));
    }
    log(`reference texts: ${texts.length} + ${chat.length} shapes (${[...texts, ...chat].map((text) => text.length).join(', ')} characters)`);
    return { responses: texts, chat };
  } finally {
    await service.kill();
    rmSync(service.dataDir, { recursive: true, force: true });
  }
}

export function textOf(response: ResponseObject): string {
  return response.output[0]?.content[0]?.text ?? '';
}
