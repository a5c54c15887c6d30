/**
 * The engine as the task core sees it: a model is taken through a lease (one generation slot),
 * loaded if needed, then asked to generate with an AbortSignal; output arrives through hooks
 * with the token ids that are the resume snapshot. Embeddings are answered directly, without a
 * lease. Nothing here knows of HTTP or SQL.
 */
import type { TaskErrorCode } from '../domain/errors.js';
import type {
  EmbedRequest, EmbedResult, EngineMessage, FinishReason, GeneratedToolCall, OutputFormat, Sampling, ToolChoice, ToolDefinition,
} from './types.js';

export type * from './types.js';
export { MAX_EMBEDDING_INPUTS } from './types.js';

export interface ModelRef {
  id: string;
  path: string;
  digest: string;
}

/** A registered model as the engine knows it, and no more (it goes to runner processes as it is). */
export function modelRefOf(model: ModelRef): ModelRef {
  return { id: model.id, path: model.path, digest: model.digest };
}

/** Arguments text a unit adds to tool call `index` (LMSP 6.2 `function_call_arguments.delta`). */
export interface ToolCallDelta {
  index: number;
  name: string;
  arguments: string;
}

export interface OutputUnit {
  /** Message content this unit adds; the concatenated texts are the message text. */
  text: string;
  /** The tokens this unit covers, in order; all units' tokens are the resume snapshot. */
  tokens: number[];
  /**
   * Tool calls this unit adds to, after its text. A call appears here first (possibly with empty
   * arguments) as soon as its name is known; the concatenated arguments of a call are its JSON.
   */
  toolCalls?: ToolCallDelta[];
}

export interface GenerateRequest {
  taskId: string;
  messages: readonly EngineMessage[];
  sampling: Sampling;
  /** Tokens already committed for this attempt; the generation continues after them. */
  resumeTokens: number[];
  /** Functions rendered into the prompt through the model's chat template (LMSP 6.2). */
  tools?: readonly ToolDefinition[];
  /** Default `auto` (with tools). `required` or a name force a call by constrained decoding. */
  toolChoice?: ToolChoice;
  /** Default true: a forced or `auto` turn may hold several calls. */
  parallelToolCalls?: boolean;
  /** What the message content must be (LMSP 6.1); default text. */
  format?: OutputFormat;
  /** Stop sequences (LMSP 13): the content ends before the first one, which is not emitted. */
  stop?: readonly string[];
}

export interface GenerateHooks {
  /** The prompt was tokenized: its size in tokens. */
  onPrompt(inputTokens: number): void;
  /** New output, in order. Units of one call must be committed together. */
  onOutput(units: OutputUnit[]): void;
  /** With tools: the calls of the finished generation, just before `generate` resolves. */
  onToolCalls?(calls: GeneratedToolCall[]): void;
}

/** A failure that becomes the task's error code. */
export class EngineError extends Error {
  override name = 'EngineError';
  constructor(readonly code: TaskErrorCode, message: string) {
    super(message);
  }
}

/**
 * The process generating ended without being asked to (a crash inside llama.cpp, the system
 * killed it): nothing was wrong with the task, so the caller may run it again. Its code is the
 * one a task gets when it is not run again.
 */
export class EngineExited extends EngineError {
  override name = 'EngineExited';
  constructor(message: string) {
    super('engine_error', message);
  }
}

/**
 * A request the engine refuses because of one of its inputs (an embedding input longer than
 * the context, a token id outside the vocabulary): a 400 naming `param`.
 */
export class EngineInputError extends Error {
  override name = 'EngineInputError';
  constructor(readonly code: 'context_length_exceeded' | 'invalid_request', readonly param: string, message: string) {
    super(message);
  }
}

/** The generation stopped because its signal was aborted. */
export class GenerationCancelled extends Error {
  override name = 'GenerationCancelled';

  /** `runnerDied`: its runner process died while the cancel was pending, which ended it the same way. */
  constructor(message: string, readonly runnerDied = false) {
    super(message);
  }
}

/** Says whether what a runner has just loaded may be used; throws when it may not. */
export type LoadConfirmation = () => Promise<void>;

/**
 * A prompt's size in tokens: exact, or with `atLeast` a lower bound that already exceeds the
 * model's context, found without tokenizing an input far too long for it.
 */
export interface TokenCount {
  tokens: number;
  contextLength: number;
  atLeast?: true;
}

export interface EngineLease {
  /** Whether `load` has work to do (the task then shows status `loading`). */
  readonly needsLoad: boolean;
  /**
   * Loads the model. `confirm` runs once the runner holds it, before anything uses it: when it
   * throws (the file changed between its check and the load), the runner is given back unloaded
   * and the load fails with that error.
   */
  load(signal: AbortSignal, confirm?: LoadConfirmation): Promise<void>;
  generate(request: GenerateRequest, hooks: GenerateHooks, signal: AbortSignal): Promise<FinishReason>;
  release(): void;
}

export interface Engine {
  /** A slot for a generation with this model, or null when none can be had now. */
  acquire(model: ModelRef): EngineLease | null;
  /** The prompt size of a conversation (with its tools), and the model's context length. */
  countTokens(model: ModelRef, messages: readonly EngineMessage[], tools?: readonly ToolDefinition[]): Promise<TokenCount>;
  /**
   * Embeddings (LMSP 14), on a runner that holds the model: an idle one, else one that is
   * generating (the embedding runs beside the generation), else a free slot loads the model.
   * Throws EngineInputError for a bad input, EngineError when the model cannot be used.
   */
  embed(model: ModelRef, request: EmbedRequest, signal?: AbortSignal, confirm?: LoadConfirmation): Promise<EmbedResult>;
  /** Ids of the models loaded now, as they were loaded (`lmsp_models_loaded` counts them). */
  loadedModelIds(): Set<string>;
  /** Whether a runner holds this model's file now, under whichever id it was loaded (GET /v1/models `loaded`). */
  isLoaded(model: ModelRef): boolean;
  /**
   * A model unregistered, or found not to match its digest (LMSP 5): runners holding it unload it
   * now, not at keep-alive; one still generating or embedding with it is given nothing new and
   * unloads it when that work ends.
   */
  unloadModel(model: ModelRef): void;
  /** Called whenever a lease is released or a model unloaded, so waiting work can retry. */
  onCapacity(listener: () => void): void;
  close(): Promise<void>;
}
