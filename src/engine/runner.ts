/**
 * The runner process: llama.cpp (through node-llama-cpp) behind IPC messages. One runner holds at
 * most one model and generates one task at a time; the service supervises it (runner-pool.ts).
 *
 * Exact resume (LMSP 7.5) rests on three facts, each measured:
 * - the prompt is evaluated in the same chunks every time, and generated tokens one at a time,
 *   so a replay computes exactly what the first run computed;
 * - the seed of each sampled token depends only on the request's seed and its position;
 * - a saved sequence state (KV cache) is a prefix of that same computation, so loading it and
 *   replaying the tokens after it is exact too, and much faster than replaying everything.
 */
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel, type Llama, type LlamaContextSequence, type LlamaModel, type Token } from 'node-llama-cpp';
import type { PromptMessage, Sampling } from './engine.js';
import { sleep } from '../time.js';
import type { OutputUnitMessage, ParentMessage, RunnerMessage, RunnerModel, RunnerSettings } from './protocol.js';
import { renderPrompt } from './prompt.js';
import { positionSeed } from './sampling.js';

/** Prompt chunk size, and the context's batch size: a cancel is checked between chunks. */
const PROMPT_CHUNK = 512;
/** Tokens kept as context for detokenising the next ones (spaces, multi-byte characters). */
const DETOKENIZE_TAIL = 16;
/** Sequence states are saved no more often than this, and at most ~2% of generation time. */
const MIN_STATE_INTERVAL_MS = 250;
const STATE_COST_FACTOR = 50;

const settings: RunnerSettings = JSON.parse(process.env.LMSP_RUNNER_SETTINGS ?? '{}') as RunnerSettings;

function send(message: RunnerMessage): void {
  process.send?.(message);
}

let llamaPromise: Promise<Llama> | null = null;
function llama(): Promise<Llama> {
  llamaPromise ??= getLlama({
    gpu: settings.gpu === 'cpu' ? false : settings.gpu,
    logLevel: LlamaLogLevel.warn,
    logger: (level, message) => {
      if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) process.stderr.write(`[llama.cpp] ${message}\n`);
    },
  });
  return llamaPromise;
}

interface LoadedModel {
  key: string;
  model: LlamaModel;
}

let loaded: LoadedModel | null = null;
const vocabularies = new Map<string, LlamaModel>();

function modelKey(model: RunnerModel): string {
  return `${model.digest}:${model.path}`;
}

async function load(model: RunnerModel): Promise<LlamaModel> {
  const key = modelKey(model);
  if (loaded?.key === key) return loaded.model;
  if (loaded) {
    await loaded.model.dispose();
    loaded = null;
  }
  const instance = await (await llama()).loadModel({ modelPath: model.path });
  loaded = { key, model: instance };
  return instance;
}

/** A tokenizer for counting: the loaded model, or the vocabulary alone (cheap to load). */
async function tokenizerFor(model: RunnerModel): Promise<LlamaModel> {
  const key = modelKey(model);
  if (loaded?.key === key) return loaded.model;
  let vocabulary = vocabularies.get(key);
  if (!vocabulary) {
    vocabulary = await (await llama()).loadModel({ modelPath: model.path, vocabOnly: true });
    vocabularies.set(key, vocabulary);
    while (vocabularies.size > 2) {
      const [oldestKey, oldest] = vocabularies.entries().next().value as [string, LlamaModel];
      vocabularies.delete(oldestKey);
      await oldest.dispose();
    }
  }
  return vocabulary;
}

class Cancelled extends Error {}

interface Generation {
  requestId: number;
  cancelled: boolean;
}
let current: Generation | null = null;

function throwIfCancelled(generation: Generation): void {
  if (generation.cancelled) throw new Cancelled();
}

/** Turns tokens into text pieces that never split a UTF-8 character. */
class Detokenizer {
  private pending: Token[] = [];
  private tail: Token[];

  constructor(private readonly model: LlamaModel, committed: readonly Token[]) {
    this.tail = committed.slice(-DETOKENIZE_TAIL);
  }

  push(token: Token): OutputUnitMessage | null {
    this.pending.push(token);
    const text = this.model.detokenize(this.pending, false, this.tail);
    // A trailing replacement character means an unfinished multi-byte sequence: wait for more.
    if (text.endsWith('\uFFFD') && this.pending.length < 4) return null;
    return this.take(text);
  }

  flush(): OutputUnitMessage | null {
    if (this.pending.length === 0) return null;
    return this.take(this.model.detokenize(this.pending, false, this.tail));
  }

  private take(text: string): OutputUnitMessage {
    const unit = { text, tokens: this.pending };
    this.tail = [...this.tail, ...this.pending].slice(-DETOKENIZE_TAIL);
    this.pending = [];
    return unit;
  }
}

function sampleOptions(sampling: Sampling, position: number) {
  return {
    generateNext: {
      token: true,
      options: { temperature: sampling.temperature, topP: sampling.topP, topK: 0, minP: 0, seed: positionSeed(sampling.seed, position) },
    },
  } as const;
}

async function evaluatePrompt(sequence: LlamaContextSequence, prompt: readonly Token[], generation: Generation,
  sampleFirst: Sampling | null): Promise<Token | null> {
  let next: Token | null = null;
  for (let start = 0; start < prompt.length; start += PROMPT_CHUNK) {
    throwIfCancelled(generation);
    const chunk = prompt.slice(start, start + PROMPT_CHUNK);
    const isLast = start + PROMPT_CHUNK >= prompt.length;
    if (isLast && sampleFirst) {
      const input = chunk.map((token, index) => (index === chunk.length - 1 ? [token, sampleOptions(sampleFirst, 0)] as const : token));
      const results = await sequence.controlledEvaluate(input as Parameters<LlamaContextSequence['controlledEvaluate']>[0]);
      next = results[chunk.length - 1]?.next?.token ?? null;
    } else {
      await sequence.controlledEvaluate(chunk);
    }
  }
  return next;
}

async function step(sequence: LlamaContextSequence, token: Token, sampling: Sampling, position: number): Promise<Token | null> {
  const results = await sequence.controlledEvaluate([[token, sampleOptions(sampling, position)]]);
  return results[0]?.next?.token ?? null;
}

function statePath(taskId: string): string {
  return join(settings.stateDir, `${taskId}.state`);
}

async function saveState(sequence: LlamaContextSequence, taskId: string): Promise<void> {
  mkdirSync(settings.stateDir, { recursive: true, mode: 0o700 });
  const temporary = `${statePath(taskId)}.tmp`;
  await sequence.saveStateToFile(temporary);
  renameSync(temporary, statePath(taskId));
}

/**
 * Brings a fresh sequence to "prompt + resume[0..m-1) evaluated" and samples position m from
 * resume[m-1], using a saved state when one matches.
 */
async function restore(sequence: LlamaContextSequence, prompt: readonly Token[], resume: readonly Token[], taskId: string,
  sampling: Sampling, generation: Generation): Promise<Token | null> {
  const expected = [...prompt, ...resume];
  let evaluated = 0; // tokens of `expected` in the sequence
  const path = statePath(taskId);
  if (existsSync(path)) {
    try {
      await sequence.loadStateFromFile(path, { acceptRisk: true });
      const state = sequence.contextTokens;
      const matches = state.length > prompt.length && state.every((token, index) => token === expected[index]);
      if (matches) evaluated = state.length;
      else await sequence.clearHistory();
    } catch {
      await sequence.clearHistory();
    }
  }
  const target = expected.length - 1; // the last known token is evaluated with sampling
  if (evaluated > target) {
    await sequence.eraseContextTokenRanges([{ start: target, end: sequence.nextTokenIndex }]);
    evaluated = target;
  }
  if (evaluated === 0) {
    await evaluatePrompt(sequence, prompt, generation, null);
    evaluated = prompt.length;
  }
  for (let index = evaluated; index < target; index++) {
    throwIfCancelled(generation);
    await sequence.controlledEvaluate([expected[index]!]);
  }
  return step(sequence, expected[target]!, sampling, resume.length);
}

async function generate(message: Extract<ParentMessage, { type: 'generate' }>, generation: Generation): Promise<void> {
  const { requestId, sampling, taskId } = message;
  const model = await load(message.model);
  const prompt = renderPrompt(model, message.messages);
  const contextLength = model.trainContextSize;
  if (prompt.tokens.length + sampling.maxOutputTokens > contextLength) {
    send({ type: 'error', requestId, code: 'context_length_exceeded',
      message: `the input (${prompt.tokens.length} tokens) and max_output_tokens (${sampling.maxOutputTokens}) exceed the model context (${contextLength})` });
    return;
  }
  send({ type: 'prompt', requestId, inputTokens: prompt.tokens.length });
  const contextSize = Math.min(contextLength, Math.ceil((prompt.tokens.length + sampling.maxOutputTokens + 1) / 256) * 256);
  const context = await model.createContext({ contextSize, batchSize: PROMPT_CHUNK, sequences: 1, threads: settings.threads });
  try {
    const sequence = context.getSequence();
    const resume = message.resumeTokens as Token[];
    let next = resume.length === 0
      ? await evaluatePrompt(sequence, prompt.tokens, generation, sampling)
      : await restore(sequence, prompt.tokens, resume, taskId, sampling, generation);
    send({ type: 'generating', requestId });
    const detokenizer = new Detokenizer(model, resume);
    let generated = resume.length;
    let lastTokenAt = performance.now();
    let lastSaveAt = performance.now();
    let saveCost = 0;
    const emit = (unit: OutputUnitMessage | null) => {
      if (unit) send({ type: 'output', requestId, units: [unit] });
    };
    for (;;) {
      throwIfCancelled(generation);
      if (next === null || model.isEogToken(next) || prompt.stopTokens.has(next)) {
        emit(detokenizer.flush());
        send({ type: 'done', requestId, finishReason: 'stop' });
        return;
      }
      const token: Token = next;
      generated += 1;
      emit(detokenizer.push(token));
      if (generated >= sampling.maxOutputTokens) {
        emit(detokenizer.flush());
        send({ type: 'done', requestId, finishReason: 'max_output_tokens' });
        return;
      }
      // The sequence now holds prompt + tokens [0, generated - 1): a valid resume point.
      const now = performance.now();
      if (generated > 1 && now - lastSaveAt >= Math.max(MIN_STATE_INTERVAL_MS, saveCost * STATE_COST_FACTOR)) {
        await saveState(sequence, taskId);
        lastSaveAt = performance.now();
        saveCost = lastSaveAt - now;
      }
      if (settings.tokenDelayMs > 0) await sleep(settings.tokenDelayMs - (performance.now() - lastTokenAt));
      lastTokenAt = performance.now();
      throwIfCancelled(generation);
      next = await step(sequence, token, sampling, generated);
    }
  } finally {
    rmSync(statePath(taskId), { force: true });
    rmSync(`${statePath(taskId)}.tmp`, { force: true });
    await context.dispose();
  }
}

async function count(message: Extract<ParentMessage, { type: 'count' }>): Promise<void> {
  const model = await tokenizerFor(message.model);
  const prompt = renderPrompt(model, message.messages as PromptMessage[]);
  send({ type: 'counted', requestId: message.requestId, tokens: prompt.tokens.length, contextLength: model.trainContextSize });
}

async function handle(message: ParentMessage): Promise<void> {
  switch (message.type) {
    case 'load':
      try {
        const model = await load(message.model);
        send({ type: 'loaded', requestId: message.requestId, contextLength: model.trainContextSize });
      } catch (error) {
        send({ type: 'error', requestId: message.requestId, code: 'model_load_failed', message: (error as Error).message });
      }
      return;
    case 'unload':
      if (loaded) await loaded.model.dispose();
      loaded = null;
      send({ type: 'unloaded', requestId: message.requestId });
      return;
    case 'count':
      try {
        await count(message);
      } catch (error) {
        send({ type: 'error', requestId: message.requestId, code: 'model_load_failed', message: (error as Error).message });
      }
      return;
    case 'generate': {
      const generation: Generation = { requestId: message.requestId, cancelled: false };
      current = generation;
      try {
        await generate(message, generation);
      } catch (error) {
        if (error instanceof Cancelled) send({ type: 'cancelled', requestId: message.requestId });
        else send({ type: 'error', requestId: message.requestId, code: 'engine_error', message: (error as Error).message });
      } finally {
        if (current === generation) current = null;
      }
      return;
    }
    case 'cancel':
      if (current && current.requestId === message.requestId) current.cancelled = true;
      return;
  }
}

process.on('message', (message: ParentMessage) => {
  void handle(message);
});
process.on('disconnect', () => process.exit(0));
send({ type: 'ready', pid: process.pid, gpu: false });
