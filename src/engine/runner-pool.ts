/**
 * Supervises runner processes (one per generation slot, like Ollama's runners; or, with
 * `sequencesPerRunner`, one per model serving its slots as sequences of one context; and one per
 * model kept loaded where `max_loaded_models` exceeds the slots): spawns them on
 * demand, keeps a model loaded for `keep_alive` after its last use, holds at most
 * `max_loaded_models` models, unloading the least recently used idle one first and never one a
 * running task uses. A runner process that dies without being asked to (a crash inside
 * llama.cpp, the system killed it) rejects each generation on it with `EngineExited`, so that
 * the scheduler applies each task's restart policy (LMSP 7.5) and runs it again on a fresh
 * process; one that crashes while loading fails its tasks with `model_load_failed` (a model that
 * crashes llama.cpp would crash it again), unless SIGKILL ended it (the system killed it). A
 * cancel the runner does not honour quickly (llama.cpp cannot interrupt a prompt chunk) ends
 * the runner process: that task ends
 * cancelled, and the death of a process it asked for is never taken for a crash.
 */
import type { DebugDelays } from '../config.js';
import type { TaskErrorCode } from '../domain/errors.js';
import { sleep, timerDelay } from '../time.js';
import {
  EngineError, EngineExited, EngineInputError, GenerationCancelled, type Engine, type EngineLease, type GenerateHooks, type GenerateRequest,
  type LoadConfirmation, type ModelRef, type TokenCount,
} from './engine.js';
import type { RunnerErrorCode, RunnerSettings } from './protocol.js';
import { RunnerProcess, type RunnerLog } from './runner-process.js';
import type { EmbedRequest, EmbedResult, EngineMessage, FinishReason, ToolDefinition } from './types.js';

/** A cancel not acknowledged by then ends the runner process (LMSP 7.4: within a second). */
const CANCEL_GRACE_MS = 600;

/**
 * How long a runner may take to render a prompt through the model's chat template, tokenize it
 * and build the grammar of its output (llama.cpp's, for a schema or tools): a template is code
 * from an untrusted file (LMSP 5), and one that never ends would hold its slot, or the tokenizer
 * every create asks, for good. Rendering takes milliseconds; past this the runner process is
 * ended and the request fails. LMSP_DEBUG_RENDER_DEADLINE_MS sets it for tests.
 */
const RENDER_DEADLINE_MS = Number(process.env.LMSP_DEBUG_RENDER_DEADLINE_MS) || 30_000;

/** `constrained`: the generation had a grammar to build too (a schema, tools), which may be what took the time. */
function renderTimedOut(constrained = false): EngineError {
  const what = constrained ? "the prompt (the model's chat template) and the grammar of its output were not ready"
    : "the model's chat template did not render the prompt";
  return new EngineError('engine_error', `${what} within ${RENDER_DEADLINE_MS / 1000} s; the engine process was stopped`);
}

export interface RunnerPoolOptions {
  slots: number;
  /** `--parallel-mode sequences`: a runner serves this many generations of its model at once. */
  sequencesPerRunner?: number;
  maxLoadedModels: number;
  keepAliveMs: number;
  settings: RunnerSettings;
  /** CPUs for the runner of each slot (a taskset list) and the taskset binary; null: not pinned. */
  affinity?: { taskset: string; runnerCpus: readonly string[] } | null;
  debug: DebugDelays;
  log?: RunnerLog;
  /** Told how each model load ended (LMSP 15: `lmsp_model_loads_total`). */
  onModelLoad?: (modelId: string, result: ModelLoadResult) => void;
}


/** A load cancelled for its own generation while the runner goes on with it for others. */
class LoadGoesOn extends GenerationCancelled {}

export const MODEL_LOAD_RESULTS = ['loaded', 'failed', 'cancelled'] as const;
export type ModelLoadResult = (typeof MODEL_LOAD_RESULTS)[number];

/** Input errors belong to embeddings; anything else a runner reports is a task error. */
function taskErrorCode(code: RunnerErrorCode): TaskErrorCode {
  return code === 'invalid_request' ? 'engine_error' : code;
}

/** Waits for `work`, or rejects with `GenerationCancelled` as soon as `signal` aborts. */
function abortable(work: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(new GenerationCancelled('cancelled while loading'));
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(new GenerationCancelled('cancelled while loading'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function sameModel(a: ModelRef | null, b: ModelRef): boolean {
  return a !== null && a.digest === b.digest && a.path === b.path;
}

export class RunnerPool implements Engine {
  private readonly runners: RunnerProcess[] = [];
  private tokenizer: RunnerProcess | null = null;
  private tokenizerTimer: NodeJS.Timeout | null = null;
  private tokenizerRequests = 0;
  /** The count in progress on the tokenizer, which the next one waits for. */
  private countQueue: Promise<unknown> = Promise.resolve();
  private readonly capacityListeners = new Set<() => void>();
  /** Embeddings waiting for a slot (or for their model to be let in): generations wait behind them. */
  private readonly embedWaiters = new Set<() => void>();
  /** Embeddings woken for a freed slot have not taken it yet: generations wait a turn. */
  private embedsWaking = false;
  /** The load each runner is doing now, for the leases that find it under way. */
  private readonly loads = new Map<RunnerProcess, { model: ModelRef; done: Promise<void> }>();
  /**
   * An embedding that waited has gone ahead of the queued generations: the next slot freed is
   * theirs first, so that embeddings that keep coming take turns with them instead of holding
   * them back for as long as they come.
   */
  private generationsOwedTurn = false;
  private closed = false;

  constructor(private readonly options: RunnerPoolOptions) {}

  onCapacity(listener: () => void): void {
    this.capacityListeners.add(listener);
  }

  private capacityChanged(): void {
    // Embeddings waiting for a slot go first: they are short, and answered while the client waits.
    // A woken embedding takes its slot when its promise settles (a microtask later): the
    // scheduler is told after that, or it would hand the slot to the next queued task first.
    // Until then a generation asking for a slot (the scheduler refilling the one just freed) is
    // told there is none. After an embedding went ahead, the scheduler is told first.
    if (this.generationsOwedTurn) this.notifyCapacity();
    const waiters = [...this.embedWaiters];
    this.embedWaiters.clear();
    for (const waiter of waiters) waiter();
    if (waiters.length === 0) return this.notifyCapacity();
    this.embedsWaking = true;
    setImmediate(() => {
      this.embedsWaking = false;
      this.notifyCapacity();
    });
  }

  private notifyCapacity(): void {
    for (const listener of this.capacityListeners) listener();
  }

  loadedModelIds(): Set<string> {
    return new Set(this.runners.filter((runner) => runner.model).map((runner) => runner.model!.id));
  }

  isLoaded(model: ModelRef): boolean {
    return this.runners.some((runner) => sameModel(runner.model, model));
  }

  unloadModel(model: ModelRef): void {
    // A runner still generating or computing embeddings with it is given nothing new, and lets
    // the model go when they end.
    const holders = this.runners.filter((runner) => sameModel(runner.model, model) || sameModel(this.loads.get(runner)?.model ?? null, model));
    for (const runner of holders) runner.retiring = true;
    const idle = holders.filter((runner) => !runner.busy && runner.embeds === 0);
    for (const runner of idle) this.unload(runner);
    if (idle.length > 0) this.capacityChanged();
  }

  acquire(model: ModelRef): EngineLease | null {
    // Embeddings go ahead of queued tasks (LMSP 14): while one waits, a slot freed or a model let go
    // is kept for it. Generations that took them would keep a model it needs loaded from ever
    // loading, where `max_loaded_models` is reached and the loaded one never idles.
    if (this.embedsWaking || (this.embedWaiters.size > 0 && !this.generationsOwedTurn)) return null;
    const runner = this.pickRunner(model);
    if (!runner) return null;
    this.generationsOwedTurn = false;
    return this.lease(runner, model);
  }

  /** The runner a generation gets (or an embedding whose model no runner holds), or null. */
  private pickRunner(model: ModelRef): RunnerProcess | null {
    if (this.closed) return null;
    if (this.runners.reduce((sum, runner) => sum + runner.active, 0) >= this.options.slots) return null;
    // A runner already generating with this model takes one more while it has sequences free.
    const joinable = this.runners.find((runner) => runner.busy && !runner.full && !runner.retiring && sameModel(runner.assigned, model));
    if (joinable) return joinable;
    const idle = this.runners.filter((runner) => !runner.busy);
    const ready = idle.find((runner) => !runner.retiring && !runner.evicting && sameModel(runner.model, model));
    if (ready) return ready;
    // A runner computing embeddings keeps its model: it is neither unloaded nor given another;
    // nor is one whose model makes room for a load about to happen.
    const free = idle.filter((runner) => runner.embeds === 0 && !runner.evicting);

    // A runner leased for a model holds it from the lease on, while it still loads it too: a
    // load underway counts against max_loaded_models, or two loads at once would both pass. A
    // model making room for it counts no more.
    const held = (runner: RunnerProcess): ModelRef | null =>
      (runner.busy && runner.assigned ? runner.assigned : runner.evicting ? null : runner.model);
    const inUse = this.runners.filter((runner) => (runner.busy || runner.embeds > 0) && held(runner)).map((runner) => held(runner)!);
    const loadedKeys = new Set(this.runners.map(held).filter((ref) => ref !== null).map((ref) => `${ref.digest}:${ref.path}`));
    const key = `${model.digest}:${model.path}`;
    if (!loadedKeys.has(key) && loadedKeys.size >= this.options.maxLoadedModels) {
      // Unload the least recently used model that no running task uses, or wait.
      const evictable = free
        .filter((runner) => runner.model && !inUse.some((used) => sameModel(runner.model, used)))
        .sort((a, b) => a.lastUsedAt - b.lastUsedAt);
      const victim = evictable[0];
      if (!victim) return null;
      // Let go when the lease loads, not now: a task that fails its checks first (its file gone
      // or changed, LMSP 5) must not push another model out of memory for nothing.
      const victims = free.filter((r) => r.model && sameModel(r.model, victim.model!));
      for (const runner of victims) runner.evicting = true;
      victim.evicts = victims;
      return victim;
    }
    // An empty runner, else a new one while slots (or models that may stay loaded, each in a
    // runner of its own) remain, else the least recently used idle one.
    return free.find((r) => !r.model)
      ?? (this.runners.length < this.maxRunners ? this.newRunner() : free.sort((a, b) => a.lastUsedAt - b.lastUsedAt)[0] ?? null);
  }

  /**
   * Runner processes at most: one per slot, and as many as `max_loaded_models` where that is more
   * (with one slot and two models to keep loaded, each stays in its own runner, idle, rather than
   * the one runner unloading a model to load the other). Generations at once stay within `slots`.
   */
  private get maxRunners(): number {
    return Math.max(this.options.slots, this.options.maxLoadedModels);
  }

  private newRunner(): RunnerProcess {
    const affinity = this.options.affinity;
    // A runner beyond the slots (a model kept loaded) may run beside any of them: all their CPUs.
    const cpus = affinity?.runnerCpus[this.runners.length] ?? affinity?.runnerCpus.join(',');
    const capacity = this.options.sequencesPerRunner ?? 1;
    // With sequences, even one slot is a sequence of a shared context (the same code at any N).
    const settings = this.options.sequencesPerRunner ? { ...this.options.settings, sequences: capacity } : this.options.settings;
    const runner = new RunnerProcess(settings, this.options.log, affinity && cpus ? { taskset: affinity.taskset, cpus } : null, capacity);
    this.runners.push(runner);
    return runner;
  }

  /** Unloading ends the runner process: the memory is given back whole. */
  private unload(runner: RunnerProcess): void {
    if (runner.keepAliveTimer) clearTimeout(runner.keepAliveTimer);
    runner.keepAliveTimer = null;
    runner.model = null;
    runner.retiring = false;
    runner.evicting = false;
    runner.kill();
  }

  private lease(runner: RunnerProcess, model: ModelRef): EngineLease {
    if (runner.keepAliveTimer) clearTimeout(runner.keepAliveTimer);
    runner.keepAliveTimer = null;
    runner.active += 1;
    runner.assigned = model;
    let released = false;
    return {
      needsLoad: !sameModel(runner.model, model) || !runner.alive,
      load: (signal, confirm) => this.load(runner, model, signal, confirm),
      generate: (request, hooks, signal) => this.generate(runner, model, request, hooks, signal),
      release: () => {
        if (released) return;
        released = true;
        runner.active -= 1;
        runner.lastUsedAt = performance.now();
        if (!runner.busy) this.becameIdle(runner);
        this.capacityChanged();
      },
    };
  }

  /** No generation runs on it any more: its model is let go now if it is retiring, else after its keep-alive. */
  private becameIdle(runner: RunnerProcess): void {
    // Leased for a model it never loaded (the task failed its checks, or was cancelled first):
    // the models that were to make room for it stay.
    if (runner.evicts) {
      for (const victim of runner.evicts) victim.evicting = false;
      runner.evicts = null;
    }
    if (!runner.retiring) return this.scheduleKeepAlive(runner);
    if (runner.embeds === 0) this.unload(runner);
  }

  private scheduleKeepAlive(runner: RunnerProcess): void {
    if (runner.keepAliveTimer) clearTimeout(runner.keepAliveTimer);
    runner.keepAliveTimer = null;
    if (!runner.model || this.options.keepAliveMs === Infinity) return;
    runner.keepAliveTimer = setTimeout(() => {
      if (!runner.busy && runner.embeds === 0) {
        this.unload(runner);
        this.capacityChanged();
      }
    }, timerDelay(this.options.keepAliveMs));
    runner.keepAliveTimer.unref();
  }

  private async load(runner: RunnerProcess, model: ModelRef, signal: AbortSignal, confirm?: LoadConfirmation): Promise<void> {
    for (;;) {
      // A listener added to a signal already aborted never hears it: a task cancelled before its
      // load began would load the model in full first.
      if (signal.aborted) throw new GenerationCancelled('cancelled while loading');
      // Leases of a runner taken together (its sequences) wait on the load one of them started:
      // the model is loaded, and counted, once (LMSP 15: `lmsp_model_loads_total`).
      const underway = this.loads.get(runner);
      if (underway && sameModel(underway.model, model)) {
        try {
          await abortable(underway.done, signal);
        } catch (error) {
          // The lease that started it was cancelled: this one loads for itself, unless it is loaded by now.
          if (signal.aborted || !(error instanceof GenerationCancelled)) throw error;
        }
        if (sameModel(runner.model, model) && runner.alive) return;
        continue;
      }
      const done = this.loadInto(runner, model, signal, confirm);
      this.loads.set(runner, { model, done });
      try {
        await done;
        this.options.onModelLoad?.(model.id, 'loaded');
        // Embeddings waiting for a runner that holds this model have one now, beside its generation.
        if (this.embedWaiters.size > 0) this.capacityChanged();
        return;
      } catch (error) {
        // A cancel that came once the runner had read the model leaves it loaded, for the next
        // task: that load is counted as loaded. One that the runner goes on with (other
        // generations wait on it) is counted when the runner answers.
        if (!(error instanceof LoadGoesOn)) {
          const loaded = error instanceof GenerationCancelled && sameModel(runner.model, model) && runner.alive;
          this.options.onModelLoad?.(model.id, loaded ? 'loaded' : error instanceof GenerationCancelled ? 'cancelled' : 'failed');
        }
        throw error;
      } finally {
        if (this.loads.get(runner)?.done === done) this.loads.delete(runner);
      }
    }
  }

  private async loadInto(runner: RunnerProcess, model: ModelRef, signal: AbortSignal, confirm?: LoadConfirmation): Promise<void> {
    const started = performance.now();
    const loading = !sameModel(runner.model, model) || !runner.alive;
    if (loading) {
      // The models making room for this one go now (this runner's own among them).
      for (const victim of runner.evicts ?? []) if (victim === runner || (!victim.busy && victim.embeds === 0)) this.unload(victim);
      runner.evicts = null;
      runner.model = null;
      await new Promise<void>((resolve, reject) => {
        /** Cancelled, while the runner goes on loading for other generations: its answer is counted then. */
        let goesOn = false;
        const onAbort = () => {
          // Other generations waiting for the same load keep the runner.
          if (runner.active <= 1) runner.kill();
          else goesOn = true;
          reject(goesOn ? new LoadGoesOn('cancelled while loading') : new GenerationCancelled('cancelled while loading'));
        };
        signal.addEventListener('abort', onAbort, { once: true });
        runner.request((requestId) => ({ type: 'load', requestId, model }), (message) => {
          if (message.type === 'loaded') {
            signal.removeEventListener('abort', onAbort);
            runner.model = model;
            if (goesOn) this.options.onModelLoad?.(model.id, 'loaded');
            resolve();
            return true;
          }
          if (message.type === 'error') {
            signal.removeEventListener('abort', onAbort);
            if (goesOn) this.options.onModelLoad?.(model.id, 'failed');
            reject(new EngineError(taskErrorCode(message.code), message.message));
            return true;
          }
          return false;
        }, (exit) => {
          signal.removeEventListener('abort', onAbort);
          if (goesOn) this.options.onModelLoad?.(model.id, 'failed');
          if (signal.aborted) reject(new GenerationCancelled('cancelled while loading'));
          // SIGKILL comes from outside (the kernel's out-of-memory killer, an operator): nothing
          // says the model is at fault, so each task's restart policy decides, as for a death
          // while generating. A crash while loading (llama.cpp aborting on the file) would come
          // again: the tasks fail.
          else if (exit.unexpected && exit.signal === 'SIGKILL') reject(new EngineExited(exit.reason));
          else reject(new EngineError('model_load_failed', exit.reason));
        });
      });
    }
    // LMSP_DEBUG_LOAD_DELAY_MS: each model load takes at least this long.
    await sleep(this.options.debug.loadDelayMs - (performance.now() - started), signal);
    if (signal.aborted) throw new GenerationCancelled('cancelled while loading');
    if (!confirm || !loading) return;
    try {
      await confirm();
    } catch (error) {
      // What the runner read is not what was checked: nothing may use it.
      this.unload(runner);
      this.capacityChanged();
      throw error;
    }
  }

  private generate(runner: RunnerProcess, model: ModelRef, request: GenerateRequest, hooks: GenerateHooks,
    signal: AbortSignal): Promise<FinishReason> {
    return new Promise<FinishReason>((resolve, reject) => {
      let requestId = 0;
      let killTimer: NodeJS.Timeout | null = null;
      let settled = false;
      const settle = (action: () => void) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        if (killTimer) clearTimeout(killTimer);
        rendered();
        action();
      };
      const onAbort = () => {
        // LMSP_DEBUG_CANCEL_DELAY_MS: the worker waits this long before acting on a cancel.
        void sleep(this.options.debug.cancelDelayMs).then(() => {
          if (settled) return;
          runner.send({ type: 'cancel', requestId });
          killTimer = setTimeout(() => {
            // The other sequences of a shared runner go on; its own stops at its next check.
            if (runner.active > 1) return settle(() => reject(new GenerationCancelled('cancelled')));
            runner.kill();
            settle(() => reject(new GenerationCancelled('cancelled (runner stopped)')));
          }, CANCEL_GRACE_MS);
        });
      };
      // Until the prompt is rendered: then llama.cpp evaluates it, which a cancel can interrupt.
      let renderTimer: NodeJS.Timeout | null = setTimeout(() => {
        renderTimer = null;
        runner.kill();
        const constrained = (request.tools?.length ?? 0) > 0 || (request.format !== undefined && request.format.type !== 'text');
        settle(() => reject(renderTimedOut(constrained)));
      }, RENDER_DEADLINE_MS);
      const rendered = () => {
        if (renderTimer) clearTimeout(renderTimer);
        renderTimer = null;
      };
      requestId = runner.request((id) => ({
        type: 'generate',
        requestId: id,
        taskId: request.taskId,
        model,
        messages: request.messages,
        sampling: request.sampling,
        resumeTokens: request.resumeTokens,
        ...(request.tools && request.tools.length > 0 ? { tools: request.tools, toolChoice: request.toolChoice, parallelToolCalls: request.parallelToolCalls } : {}),
        ...(request.format ? { format: request.format } : {}),
        ...(request.stop && request.stop.length > 0 ? { stop: request.stop } : {}),
      }), (message) => {
        switch (message.type) {
          case 'prompt':
            rendered();
            hooks.onPrompt(message.inputTokens);
            return false;
          case 'output':
            if (!settled) hooks.onOutput(message.units);
            return false;
          case 'generating':
            return false;
          case 'done':
            settle(() => {
              if (message.toolCalls) hooks.onToolCalls?.(message.toolCalls);
              resolve(message.finishReason);
            });
            return true;
          case 'cancelled':
            settle(() => reject(new GenerationCancelled('cancelled')));
            return true;
          case 'error':
            settle(() => reject(new EngineError(taskErrorCode(message.code), message.message)));
            return true;
          default:
            return false;
        }
      }, (exit) => {
        // A crash reaches every generation of the runner (all its sequences): each may run again.
        settle(() => reject(signal.aborted ? new GenerationCancelled('cancelled', exit.unexpected)
          : exit.unexpected ? new EngineExited(exit.reason) : new EngineError('engine_error', exit.reason)));
      });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * LMSP 14: an embedding runs on a runner that holds the model: an idle one, else one that is
   * generating (beside the generation, on its own context: the generation's output does not
   * change, only its pace), else a free slot loads the model for it (with keep_alive as for
   * generations). Only when every slot is busy with other models does it wait for one, ahead
   * of queued tasks.
   */
  async embed(model: ModelRef, request: EmbedRequest, signal?: AbortSignal, confirm?: LoadConfirmation): Promise<EmbedResult> {
    let waited = false;
    for (;;) {
      if (this.closed) throw new EngineError('engine_error', 'the engine is closed');
      if (signal?.aborted) throw new GenerationCancelled('cancelled');
      const holders = this.runners.filter((runner) => sameModel(runner.model, model) && runner.alive && !runner.retiring && !runner.evicting);
      const holder = holders.find((runner) => !runner.busy) ?? holders[0];
      if (holder) {
        if (waited) this.generationsOwedTurn = true;
        return this.embedOn(holder, model, request, signal);
      }
      const runner = this.pickRunner(model);
      if (runner) {
        if (waited) this.generationsOwedTurn = true;
        const lease = this.lease(runner, model);
        try {
          await lease.load(signal ?? new AbortController().signal, confirm);
          return await this.embedOn(runner, model, request, signal);
        } finally {
          lease.release();
        }
      }
      waited = true;
      await new Promise<void>((resolve) => {
        const done = () => {
          signal?.removeEventListener('abort', done);
          // A client that left waits no more, and holds up no generation either.
          if (this.embedWaiters.delete(done) && this.embedWaiters.size === 0) this.notifyCapacity();
          resolve();
        };
        this.embedWaiters.add(done);
        signal?.addEventListener('abort', done, { once: true });
      });
    }
  }

  private embedOn(runner: RunnerProcess, model: ModelRef, request: EmbedRequest, signal?: AbortSignal): Promise<EmbedResult> {
    if (runner.keepAliveTimer) clearTimeout(runner.keepAliveTimer);
    runner.keepAliveTimer = null;
    runner.embeds += 1;
    let onAbort = () => {};
    return new Promise<EmbedResult>((resolve, reject) => {
      let requestId = 0;
      onAbort = () => {
        runner.send({ type: 'cancel', requestId });
        reject(new GenerationCancelled('cancelled'));
      };
      requestId = runner.request((id) => ({
        type: 'embed', requestId: id, model, inputs: request.inputs,
        ...(request.dimensions === undefined ? {} : { dimensions: request.dimensions }),
      }), (message) => {
        if (message.type === 'embedded') resolve({ embeddings: message.embeddings, promptTokens: message.promptTokens, pooling: message.pooling });
        else if (message.type === 'error' && message.param !== undefined && (message.code === 'invalid_request' || message.code === 'context_length_exceeded')) {
          reject(new EngineInputError(message.code, message.param, message.message));
        } else if (message.type === 'error') reject(new EngineError(taskErrorCode(message.code), message.message));
        else if (message.type === 'cancelled') reject(new GenerationCancelled('cancelled'));
        else return false;
        return true;
      }, (exit) => reject(new EngineError('engine_error', exit.reason)));
      signal?.addEventListener('abort', onAbort, { once: true });
    }).finally(() => {
      signal?.removeEventListener('abort', onAbort);
      runner.embeds -= 1;
      runner.lastUsedAt = performance.now();
      if (!runner.busy && runner.embeds === 0) {
        this.becameIdle(runner);
        this.capacityChanged();
      }
    });
  }

  /**
   * Counts run on the tokenizer process, never on a runner that holds the model: a count renders
   * and tokenizes the whole input on that process's thread, so one client's huge input would
   * stall the generations of others there, and a count past its deadline ends the process it
   * runs on. They run one at a time, each with the whole deadline for itself.
   */
  countTokens(model: ModelRef, messages: readonly EngineMessage[], tools?: readonly ToolDefinition[]): Promise<TokenCount> {
    this.tokenizerRequests += 1;
    if (this.tokenizerTimer) clearTimeout(this.tokenizerTimer);
    this.tokenizerTimer = null;
    const turn = this.countQueue.then(() => this.countOnTokenizer(model, messages, tools)).finally(() => {
      this.tokenizerRequests -= 1;
      this.scheduleTokenizerExit();
    });
    this.countQueue = turn.catch(() => undefined);
    return turn;
  }

  private countOnTokenizer(model: ModelRef, messages: readonly EngineMessage[], tools?: readonly ToolDefinition[]): Promise<TokenCount> {
    const runner = this.tokenizerRunner();
    return new Promise((resolve, reject) => {
      // A count renders the prompt too: one that does not end stops the tokenizer, not every create after it.
      const deadline = setTimeout(() => {
        runner.kill();
        reject(renderTimedOut());
      }, RENDER_DEADLINE_MS);
      const settle = (action: () => void) => {
        clearTimeout(deadline);
        action();
      };
      runner.request((requestId) => ({ type: 'count', requestId, model, messages, ...(tools && tools.length > 0 ? { tools } : {}) }), (message) => {
        if (message.type === 'counted') {
          const { tokens, contextLength, atLeast } = message;
          settle(() => resolve({ tokens, contextLength, ...(atLeast ? { atLeast } : {}) }));
          return true;
        }
        if (message.type === 'error') {
          settle(() => reject(new EngineError(taskErrorCode(message.code), message.message)));
          return true;
        }
        return false;
      }, (exit) => settle(() => reject(new EngineError('engine_error', exit.reason))));
    });
  }

  /** The process that counts: it loads only vocabularies. */
  private tokenizerRunner(): RunnerProcess {
    this.tokenizer ??= new RunnerProcess(this.options.settings, this.options.log);
    return this.tokenizer;
  }

  /** The tokenizer runner ends after keep_alive without requests. */
  private scheduleTokenizerExit(): void {
    if (this.tokenizerRequests > 0 || !this.tokenizer) return;
    if (this.tokenizerTimer) clearTimeout(this.tokenizerTimer);
    const idleMs = this.options.keepAliveMs === Infinity ? 300_000 : this.options.keepAliveMs;
    this.tokenizerTimer = setTimeout(() => this.tokenizer?.kill(), timerDelay(idleMs));
    this.tokenizerTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.tokenizerTimer) clearTimeout(this.tokenizerTimer);
    this.tokenizer?.kill();
    for (const runner of this.runners) this.unload(runner);
  }
}
