/**
 * The engine as the task core sees it: a model is taken through a lease (one generation slot),
 * loaded if needed, then asked to generate with an AbortSignal; output arrives through hooks
 * with the token ids that are the resume snapshot. Nothing here knows of HTTP or SQL.
 */
import type { TaskErrorCode } from '../domain/errors.js';
import type { FinishReason } from '../domain/tasks.js';

export type { FinishReason };

/** One message of the conversation, as the engine renders it into a prompt. */
export interface PromptMessage {
  role: 'user' | 'assistant' | 'system' | 'developer';
  content: string;
}

/** Sampling parameters of one generation. */
export interface Sampling {
  temperature: number;
  topP: number;
  seed: number;
  maxOutputTokens: number;
}

export interface ModelRef {
  id: string;
  path: string;
  digest: string;
}

export interface OutputUnit {
  text: string;
  tokens: number[];
}

export interface GenerateRequest {
  taskId: string;
  messages: PromptMessage[];
  sampling: Sampling;
  /** Tokens already committed for this attempt; the generation continues after them. */
  resumeTokens: number[];
}

export interface GenerateHooks {
  /** The prompt was tokenized: its size in tokens. */
  onPrompt(inputTokens: number): void;
  /** New output, in order; the concatenated texts are the response text. */
  onOutput(units: OutputUnit[]): void;
}

/** A failure that becomes the task's error code. */
export class EngineError extends Error {
  override name = 'EngineError';
  constructor(readonly code: TaskErrorCode, message: string) {
    super(message);
  }
}

/** The generation stopped because its signal was aborted. */
export class GenerationCancelled extends Error {
  override name = 'GenerationCancelled';
}

export interface EngineLease {
  /** Whether `load` has work to do (the task then shows status `loading`). */
  readonly needsLoad: boolean;
  load(signal: AbortSignal): Promise<void>;
  generate(request: GenerateRequest, hooks: GenerateHooks, signal: AbortSignal): Promise<FinishReason>;
  release(): void;
}

export interface Engine {
  /** A slot for a generation with this model, or null when none can be had now. */
  acquire(model: ModelRef): EngineLease | null;
  /** Exact prompt size of a conversation, and the model's context length. */
  countTokens(model: ModelRef, messages: PromptMessage[]): Promise<{ tokens: number; contextLength: number }>;
  /** Ids of the models loaded now (GET /v1/models `loaded`). */
  loadedModelIds(): Set<string>;
  /** Called whenever a lease is released or a model unloaded, so waiting work can retry. */
  onCapacity(listener: () => void): void;
  close(): Promise<void>;
}
