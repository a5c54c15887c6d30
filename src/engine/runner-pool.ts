/**
 * Supervises runner processes (one per generation slot, like Ollama's runners): spawns them on
 * demand, keeps a model loaded for `keep_alive` after its last use, holds at most
 * `max_loaded_models` models, unloading the least recently used idle one first and never one a
 * running task uses. A runner that dies fails its task with `engine_error`; the next task gets
 * a fresh runner. A cancel the runner does not honour quickly (llama.cpp cannot interrupt a
 * prompt chunk) ends the runner process.
 */
import type { DebugDelays } from '../config.js';
import { sleep } from '../time.js';
import {
  EngineError, GenerationCancelled, type Engine, type EngineLease, type FinishReason, type GenerateHooks, type GenerateRequest,
  type ModelRef, type PromptMessage,
} from './engine.js';
import type { RunnerSettings } from './protocol.js';
import { RunnerProcess, type RunnerLog } from './runner-process.js';

/** A cancel not acknowledged by then ends the runner process (LMSP 7.4: within a second). */
const CANCEL_GRACE_MS = 600;

export interface RunnerPoolOptions {
  slots: number;
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

export type ModelLoadResult = 'loaded' | 'failed' | 'cancelled';

function sameModel(a: ModelRef | null, b: ModelRef): boolean {
  return a !== null && a.digest === b.digest && a.path === b.path;
}

export class RunnerPool implements Engine {
  private readonly runners: RunnerProcess[] = [];
  private tokenizer: RunnerProcess | null = null;
  private tokenizerTimer: NodeJS.Timeout | null = null;
  private tokenizerRequests = 0;
  private readonly capacityListeners = new Set<() => void>();
  private closed = false;

  constructor(private readonly options: RunnerPoolOptions) {}

  onCapacity(listener: () => void): void {
    this.capacityListeners.add(listener);
  }

  private capacityChanged(): void {
    for (const listener of this.capacityListeners) listener();
  }

  loadedModelIds(): Set<string> {
    return new Set(this.runners.filter((runner) => runner.model).map((runner) => runner.model!.id));
  }

  acquire(model: ModelRef): EngineLease | null {
    if (this.closed) return null;
    if (this.runners.filter((runner) => runner.busy).length >= this.options.slots) return null;
    const idle = this.runners.filter((runner) => !runner.busy);
    const ready = idle.find((runner) => sameModel(runner.model, model));
    if (ready) return this.lease(ready, model);

    const inUse = this.runners.filter((runner) => runner.busy && runner.model).map((runner) => runner.model!);
    const loadedKeys = new Set(this.runners.filter((runner) => runner.model).map((runner) => `${runner.model!.digest}:${runner.model!.path}`));
    const key = `${model.digest}:${model.path}`;
    if (!loadedKeys.has(key) && loadedKeys.size >= this.options.maxLoadedModels) {
      // Unload the least recently used model that no running task uses, or wait.
      const evictable = idle
        .filter((runner) => runner.model && !inUse.some((used) => sameModel(runner.model, used)))
        .sort((a, b) => a.lastUsedAt - b.lastUsedAt);
      const victim = evictable[0];
      if (!victim) return null;
      for (const runner of idle.filter((r) => r.model && sameModel(r.model, victim.model!))) this.unload(runner);
    }
    // An empty runner, else a new one while slots remain, else the least recently used idle one.
    const runner = idle.find((r) => !r.model)
      ?? (this.runners.length < this.options.slots ? this.newRunner() : idle.sort((a, b) => a.lastUsedAt - b.lastUsedAt)[0]!);
    return this.lease(runner, model);
  }

  private newRunner(): RunnerProcess {
    const affinity = this.options.affinity;
    const cpus = affinity?.runnerCpus[this.runners.length];
    const runner = new RunnerProcess(this.options.settings, this.options.log, affinity && cpus ? { taskset: affinity.taskset, cpus } : null);
    this.runners.push(runner);
    return runner;
  }

  /** Unloading ends the runner process: the memory is given back whole. */
  private unload(runner: RunnerProcess): void {
    if (runner.keepAliveTimer) clearTimeout(runner.keepAliveTimer);
    runner.keepAliveTimer = null;
    runner.model = null;
    runner.kill();
  }

  private lease(runner: RunnerProcess, model: ModelRef): EngineLease {
    if (runner.keepAliveTimer) clearTimeout(runner.keepAliveTimer);
    runner.keepAliveTimer = null;
    runner.busy = true;
    let released = false;
    return {
      needsLoad: !sameModel(runner.model, model) || !runner.alive,
      load: (signal) => this.load(runner, model, signal),
      generate: (request, hooks, signal) => this.generate(runner, model, request, hooks, signal),
      release: () => {
        if (released) return;
        released = true;
        runner.busy = false;
        runner.lastUsedAt = Date.now();
        this.scheduleKeepAlive(runner);
        this.capacityChanged();
      },
    };
  }

  private scheduleKeepAlive(runner: RunnerProcess): void {
    if (!runner.model || this.options.keepAliveMs === Infinity) return;
    runner.keepAliveTimer = setTimeout(() => {
      if (!runner.busy) {
        this.unload(runner);
        this.capacityChanged();
      }
    }, this.options.keepAliveMs);
    runner.keepAliveTimer.unref();
  }

  private async load(runner: RunnerProcess, model: ModelRef, signal: AbortSignal): Promise<void> {
    try {
      await this.loadInto(runner, model, signal);
      this.options.onModelLoad?.(model.id, 'loaded');
    } catch (error) {
      this.options.onModelLoad?.(model.id, error instanceof GenerationCancelled ? 'cancelled' : 'failed');
      throw error;
    }
  }

  private async loadInto(runner: RunnerProcess, model: ModelRef, signal: AbortSignal): Promise<void> {
    const started = performance.now();
    if (!sameModel(runner.model, model) || !runner.alive) {
      runner.model = null;
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          runner.kill();
          reject(new GenerationCancelled('cancelled while loading'));
        };
        signal.addEventListener('abort', onAbort, { once: true });
        runner.request((requestId) => ({ type: 'load', requestId, model }), (message) => {
          if (message.type === 'loaded') {
            signal.removeEventListener('abort', onAbort);
            runner.model = model;
            resolve();
            return true;
          }
          if (message.type === 'error') {
            signal.removeEventListener('abort', onAbort);
            reject(new EngineError(message.code, message.message));
            return true;
          }
          return false;
        }, (reason) => {
          signal.removeEventListener('abort', onAbort);
          reject(signal.aborted ? new GenerationCancelled('cancelled while loading') : new EngineError('model_load_failed', reason));
        });
      });
    }
    // LMSP_DEBUG_LOAD_DELAY_MS: each model load takes at least this long.
    await sleep(this.options.debug.loadDelayMs - (performance.now() - started), signal);
    if (signal.aborted) throw new GenerationCancelled('cancelled while loading');
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
        action();
      };
      const onAbort = () => {
        // LMSP_DEBUG_CANCEL_DELAY_MS: the worker waits this long before acting on a cancel.
        void sleep(this.options.debug.cancelDelayMs).then(() => {
          if (settled) return;
          runner.send({ type: 'cancel', requestId });
          killTimer = setTimeout(() => {
            runner.kill();
            settle(() => reject(new GenerationCancelled('cancelled (runner stopped)')));
          }, CANCEL_GRACE_MS);
        });
      };
      requestId = runner.request((id) => ({
        type: 'generate',
        requestId: id,
        taskId: request.taskId,
        model,
        messages: request.messages,
        sampling: request.sampling,
        resumeTokens: request.resumeTokens,
      }), (message) => {
        switch (message.type) {
          case 'prompt':
            hooks.onPrompt(message.inputTokens);
            return false;
          case 'output':
            if (!settled) hooks.onOutput(message.units);
            return false;
          case 'generating':
            return false;
          case 'done':
            settle(() => resolve(message.finishReason));
            return true;
          case 'cancelled':
            settle(() => reject(new GenerationCancelled('cancelled')));
            return true;
          case 'error':
            settle(() => reject(new EngineError(message.code, message.message)));
            return true;
          default:
            return false;
        }
      }, (reason) => {
        settle(() => reject(signal.aborted ? new GenerationCancelled('cancelled') : new EngineError('engine_error', reason)));
      });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  async countTokens(model: ModelRef, messages: PromptMessage[]): Promise<{ tokens: number; contextLength: number }> {
    const loaded = this.runners.find((r) => sameModel(r.model, model) && r.alive);
    const runner = loaded ?? this.tokenizerRunner();
    if (!loaded) this.tokenizerRequests += 1;
    try {
      return await new Promise((resolve, reject) => {
        runner.request((requestId) => ({ type: 'count', requestId, model, messages }), (message) => {
          if (message.type === 'counted') {
            resolve({ tokens: message.tokens, contextLength: message.contextLength });
            return true;
          }
          if (message.type === 'error') {
            reject(new EngineError(message.code, message.message));
            return true;
          }
          return false;
        }, (reason) => reject(new EngineError('engine_error', reason)));
      });
    } finally {
      if (!loaded) {
        this.tokenizerRequests -= 1;
        this.scheduleTokenizerExit();
      }
    }
  }

  /** A runner that only tokenizes (vocabulary-only models), for models no runner has loaded. */
  private tokenizerRunner(): RunnerProcess {
    this.tokenizer ??= new RunnerProcess(this.options.settings, this.options.log);
    if (this.tokenizerTimer) clearTimeout(this.tokenizerTimer);
    this.tokenizerTimer = null;
    return this.tokenizer;
  }

  /** The tokenizer runner ends after keep_alive without requests. */
  private scheduleTokenizerExit(): void {
    if (this.tokenizerRequests > 0 || !this.tokenizer) return;
    if (this.tokenizerTimer) clearTimeout(this.tokenizerTimer);
    const idleMs = this.options.keepAliveMs === Infinity ? 300_000 : this.options.keepAliveMs;
    this.tokenizerTimer = setTimeout(() => this.tokenizer?.kill(), idleMs);
    this.tokenizerTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.tokenizerTimer) clearTimeout(this.tokenizerTimer);
    this.tokenizer?.kill();
    for (const runner of this.runners) this.unload(runner);
  }
}
