/**
 * Messages between the service and a runner process (engine/runner.ts). llama.cpp lives in the
 * runner, so a native abort there (GGML_ASSERT on a malformed model) ends that process and fails
 * its task with `engine_error`, instead of taking the service down.
 */
import type { TaskErrorCode } from '../domain/errors.js';
import type { OutputUnit } from './engine.js';
import type {
  EmbeddingInput, EmbeddingPooling, EngineMessage, FinishReason, GeneratedToolCall, OutputFormat, Sampling, ToolChoice, ToolDefinition,
} from './types.js';

export interface RunnerModel {
  id: string;
  path: string;
  digest: string;
}

export interface RunnerSettings {
  gpu: 'auto' | 'cpu' | 'cuda' | 'vulkan' | 'metal';
  threads: number;
  /** Where sequence states are saved for fast exact resume. */
  stateDir: string;
  /** LMSP_DEBUG_TOKEN_DELAY_MS: each generated token takes at least this long. */
  tokenDelayMs: number;
  /** LMSP_DEBUG_LOAD_DELAY_MS: each load of a model by this process takes at least this long. */
  loadDelayMs?: number;
  /** `--parallel-mode sequences`: generations at once, as sequences of one context; absent: one, with a context of its own. */
  sequences?: number;
}

export interface GenerateMessage {
  type: 'generate';
  requestId: number;
  taskId: string;
  model: RunnerModel;
  messages: readonly EngineMessage[];
  sampling: Sampling;
  /** Token ids already committed for this attempt (the snapshot); empty for a fresh start. */
  resumeTokens: number[];
  tools?: readonly ToolDefinition[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  format?: OutputFormat;
  stop?: readonly string[];
}

export interface EmbedMessage {
  type: 'embed';
  requestId: number;
  model: RunnerModel;
  inputs: readonly EmbeddingInput[];
  dimensions?: number;
}

export type ParentMessage =
  | { type: 'load'; requestId: number; model: RunnerModel }
  | { type: 'unload'; requestId: number }
  | { type: 'count'; requestId: number; model: RunnerModel; messages: readonly EngineMessage[]; tools?: readonly ToolDefinition[] }
  | GenerateMessage
  | EmbedMessage
  | { type: 'cancel'; requestId: number }
  /** Which backend llama.cpp uses under these settings (`--parallel-mode auto` asks at startup). */
  | { type: 'backend'; requestId: number };

export type OutputUnitMessage = OutputUnit;

/** A task error, or `invalid_request` / `context_length_exceeded` with `param` for a bad input. */
export type RunnerErrorCode = TaskErrorCode | 'invalid_request';

export type RunnerMessage =
  | { type: 'ready'; pid: number }
  /** The GPU backend llama.cpp loaded (`cuda`, `vulkan`, `metal`), or false on the CPU. */
  | { type: 'backend'; requestId: number; gpu: string | false }
  | { type: 'loaded'; requestId: number; contextLength: number }
  | { type: 'unloaded'; requestId: number }
  /** `atLeast`: `tokens` is a lower bound, already past the context, of an input not tokenized. */
  | { type: 'counted'; requestId: number; tokens: number; contextLength: number; atLeast?: true }
  | { type: 'prompt'; requestId: number; inputTokens: number }
  /** Prompt processing is over; from here a cancel is honoured between tokens. */
  | { type: 'generating'; requestId: number }
  | { type: 'output'; requestId: number; units: OutputUnitMessage[] }
  | { type: 'done'; requestId: number; finishReason: FinishReason; toolCalls?: GeneratedToolCall[] }
  | { type: 'embedded'; requestId: number; embeddings: number[][]; promptTokens: number[]; pooling: EmbeddingPooling }
  | { type: 'cancelled'; requestId: number }
  | { type: 'error'; requestId: number; code: RunnerErrorCode; message: string; param?: string };
