/**
 * The engine on its own, for engine-level tests: a real RunnerPool (real runner processes and
 * node-llama-cpp) on a fresh directory holding lmsp-tiny, and a generation driven to its end
 * with every unit it reported.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FinishReason, GeneratedToolCall } from '../../src/engine/types.js';
import type { GenerateRequest, ModelRef, OutputUnit } from '../../src/engine/engine.js';
import { writeGgufFile } from '../../src/engine/gguf-writer.js';
import { RunnerPool, type RunnerPoolOptions } from '../../src/engine/runner-pool.js';
import { buildSyntheticModel, LMSP_TINY, type SyntheticModelOptions } from '../../src/engine/synthetic-model.js';
import { withDataDir } from './data-dir.js';

export interface TestEngine {
  engine: RunnerPool;
  dir: string;
  tiny: ModelRef;
  /** Writes a synthetic model into the directory. */
  addModel(options: SyntheticModelOptions): ModelRef;
}

export interface EngineOptions {
  slots?: number;
  maxLoadedModels?: number;
  keepAliveMs?: number;
  tokenDelayMs?: number;
  /** LMSP_DEBUG_LOAD_DELAY_MS as the pool sees it: after the runner has read the model, the load waits out the rest. */
  loadDelayMs?: number;
  /** How slots run; by default LMSP_PARALLEL_MODE, as the service reads it, else processes. */
  parallelMode?: 'processes' | 'sequences';
  onModelLoad?: RunnerPoolOptions['onModelLoad'];
}

function modelRef(path: string, id: string): ModelRef {
  return { id, path, digest: `sha256:${createHash('sha256').update(readFileSync(path)).digest('hex')}` };
}

export function newEngine(dir: string, options: EngineOptions = {}): RunnerPool {
  const mode = options.parallelMode ?? (process.env.LMSP_PARALLEL_MODE === 'sequences' ? 'sequences' : 'processes');
  return new RunnerPool({
    slots: options.slots ?? 1,
    ...(mode === 'sequences' ? { sequencesPerRunner: options.slots ?? 1 } : {}),
    maxLoadedModels: options.maxLoadedModels ?? 1,
    keepAliveMs: options.keepAliveMs ?? 60_000,
    settings: { gpu: 'cpu', threads: 1, stateDir: join(dir, 'state'), tokenDelayMs: options.tokenDelayMs ?? 0 },
    debug: { loadDelayMs: options.loadDelayMs ?? 0, tokenDelayMs: 0, cancelDelayMs: 0, dbMaxPages: 0 },
    ...(options.onModelLoad ? { onModelLoad: options.onModelLoad } : {}),
  });
}

export function withEngine<T>(options: EngineOptions, run: (engine: TestEngine) => Promise<T>): Promise<T> {
  return withDataDir(async (dir) => {
    const engine = newEngine(dir, options);
    const addModel = (model: SyntheticModelOptions) => {
      const path = join(dir, `${model.name}.gguf`);
      writeGgufFile(path, buildSyntheticModel(model));
      return modelRef(path, model.name);
    };
    try {
      return await run({ engine, dir, tiny: addModel(LMSP_TINY), addModel });
    } finally {
      await engine.close();
    }
  }, 'engine');
}

export interface GenerationResult {
  units: OutputUnit[];
  text: string;
  tokens: number[];
  finishReason: FinishReason;
  toolCalls: GeneratedToolCall[] | null;
  inputTokens: number;
}

export function sampling(seed: number, maxOutputTokens: number, temperature = 1): GenerateRequest['sampling'] {
  return { temperature, topP: 1, seed, maxOutputTokens };
}

/** Runs one generation on a fresh lease; `onUnit` may abort it (the signal) or kill its runner. */
export async function runGeneration(engine: RunnerPool, model: ModelRef, request: Omit<GenerateRequest, 'taskId' | 'resumeTokens'> & { resumeTokens?: number[]; taskId?: string },
  options: { signal?: AbortSignal; onUnit?: (unit: OutputUnit, all: OutputUnit[]) => void } = {}): Promise<GenerationResult> {
  const lease = engine.acquire(model);
  if (!lease) throw new Error('no engine slot');
  const units: OutputUnit[] = [];
  let inputTokens = -1;
  let toolCalls: GeneratedToolCall[] | null = null;
  const signal = options.signal ?? new AbortController().signal;
  try {
    await lease.load(signal);
    const finishReason = await lease.generate({ taskId: request.taskId ?? `task_${Math.random().toString(36).slice(2)}`, resumeTokens: [], ...request }, {
      onPrompt: (count) => { inputTokens = count; },
      onOutput: (batch) => {
        for (const unit of batch) {
          units.push(unit);
          options.onUnit?.(unit, units);
        }
      },
      onToolCalls: (calls) => { toolCalls = calls; },
    }, signal);
    return { units, text: units.map((unit) => unit.text).join(''), tokens: units.flatMap((unit) => unit.tokens), finishReason, toolCalls, inputTokens };
  } finally {
    lease.release();
  }
}

/** The arguments text of each tool call, from the units. */
export function callArguments(units: readonly OutputUnit[]): Array<{ name: string; arguments: string }> {
  const calls: Array<{ name: string; arguments: string }> = [];
  for (const unit of units) {
    for (const delta of unit.toolCalls ?? []) {
      calls[delta.index] ??= { name: delta.name, arguments: '' };
      calls[delta.index]!.arguments += delta.arguments;
    }
  }
  return calls;
}
