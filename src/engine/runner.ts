/**
 * The runner process: llama.cpp (through node-llama-cpp) behind IPC messages. One runner holds at
 * most one model and generates one task at a time (or, with `settings.sequences`, up to that many
 * at once as sequences of one context), and answers embedding requests on that model beside
 * it; the service supervises it (runner-pool.ts). Generation itself is generation.ts.
 */
import { getLlama, LlamaLogLevel, type Llama, type LlamaModel } from 'node-llama-cpp';
import { embed, EmbeddingContexts } from './embeddings.js';
import { Cancelled, generate, type Generation } from './generation.js';
import { grammarFor } from './grammar-state.js';
import { loadFailure } from './load-failure.js';
import type { ParentMessage, RunnerMessage, RunnerModel, RunnerSettings } from './protocol.js';
import { sleep } from '../time.js';
import { promptLowerBound, renderPrompt } from './prompt.js';
import { contextPerGeneration, sharedContext } from './sequences.js';

const settings: RunnerSettings = JSON.parse(process.env.LMSP_RUNNER_SETTINGS ?? '{}') as RunnerSettings;

/**
 * To the service. A service that is gone (killed while this runner started or worked) has
 * nothing left to hear: the runner ends at once and quietly, without a stack trace of a closed
 * channel on the standard error it shares with the service.
 */
function send(message: RunnerMessage): void {
  if (!process.connected) process.exit(0);
  process.send?.(message, undefined, {}, (error) => {
    if (error) process.exit(0);
  });
}

let llamaPromise: Promise<Llama> | null = null;
function llama(): Promise<Llama> {
  llamaPromise ??= getLlama({
    gpu: settings.gpu === 'cpu' ? false : settings.gpu,
    logLevel: LlamaLogLevel.warn,
    logger: (level, message) => {
      if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) {
        process.stderr.write(`[llama.cpp] ${message}\n`);
        loadErrors?.push(message);
      }
    },
  });
  return llamaPromise;
}

/** llama.cpp's error lines while a model loads, for the error of a load it refuses. */
let loadErrors: string[] | null = null;

async function explained(modelPath: string, work: () => Promise<LlamaModel>): Promise<LlamaModel> {
  loadErrors = [];
  try {
    return await work();
  } catch (error) {
    // Its log lines come through a queue of their own: those of the failure are in by the next turn.
    await new Promise((resolve) => setImmediate(resolve));
    throw loadFailure(error, loadErrors, modelPath);
  } finally {
    loadErrors = null;
  }
}

interface LoadedModel {
  key: string;
  model: LlamaModel;
}

let loaded: LoadedModel | null = null;
const vocabularies = new Map<string, LlamaModel>();
const embeddingContexts = new EmbeddingContexts(settings.threads);

function modelKey(model: RunnerModel): string {
  return `${model.digest}:${model.path}`;
}

const sequences = (settings.sequences ?? 0) > 0 ? sharedContext(settings.sequences!, settings.threads) : contextPerGeneration(settings.threads);

/** Loads one after the other: generations sharing this runner may ask for their model at once. */
let loading: Promise<unknown> = Promise.resolve();
function load(model: RunnerModel): Promise<LlamaModel> {
  const next = loading.then(() => loadNow(model));
  loading = next.catch(() => undefined);
  return next;
}

async function loadNow(model: RunnerModel): Promise<LlamaModel> {
  const key = modelKey(model);
  if (loaded?.key === key) return loaded.model;
  await embeddingContexts.dispose();
  await sequences.dispose();
  if (loaded) {
    await loaded.model.dispose();
    loaded = null;
  }
  const engine = await llama();
  const instance = await explained(model.path, () => engine.loadModel({ modelPath: model.path }));
  loaded = { key, model: instance };
  return instance;
}

/** A tokenizer for counting: the loaded model, or the vocabulary alone (cheap to load). */
async function tokenizerFor(model: RunnerModel): Promise<LlamaModel> {
  const key = modelKey(model);
  if (loaded?.key === key) return loaded.model;
  let vocabulary = vocabularies.get(key);
  if (!vocabulary) {
    const engine = await llama();
    vocabulary = await explained(model.path, () => engine.loadModel({ modelPath: model.path, vocabOnly: true }));
    vocabularies.set(key, vocabulary);
    while (vocabularies.size > 2) {
      const [oldestKey, oldest] = vocabularies.entries().next().value as [string, LlamaModel];
      vocabularies.delete(oldestKey);
      await oldest.dispose();
    }
  }
  return vocabulary;
}

/** Generations in progress, by request id (one, or one per sequence). */
const generations = new Map<number, Generation>();
/** Embedding requests in progress, by request id: a cancel stops one between inputs. */
const embeddings = new Map<number, { cancelled: boolean }>();

const runtime = { settings, send, grammar: async (gbnf: string) => grammarFor(await llama(), gbnf), sequences };

async function handle(message: ParentMessage): Promise<void> {
  switch (message.type) {
    case 'load':
      try {
        const started = performance.now();
        const model = await load(message.model);
        // LMSP_DEBUG_LOAD_DELAY_MS: a slow load, inside this process, as a large model's is.
        await sleep((settings.loadDelayMs ?? 0) - (performance.now() - started));
        send({ type: 'loaded', requestId: message.requestId, contextLength: model.trainContextSize });
      } catch (error) {
        send({ type: 'error', requestId: message.requestId, code: 'model_load_failed', message: (error as Error).message });
      }
      return;
    case 'unload':
      await embeddingContexts.dispose();
      await sequences.dispose();
      if (loaded) await loaded.model.dispose();
      loaded = null;
      send({ type: 'unloaded', requestId: message.requestId });
      return;
    case 'count':
      try {
        const model = await tokenizerFor(message.model);
        // A vocabulary-only model reports no context size; the file's metadata has it.
        const contextLength = model.trainContextSize || (model.fileInsights.trainContextSize ?? 0);
        const atLeast = promptLowerBound(model, message.messages, message.tools ?? []);
        if (atLeast > contextLength) {
          send({ type: 'counted', requestId: message.requestId, tokens: atLeast, contextLength, atLeast: true });
          return;
        }
        const prompt = renderPrompt(model, message.messages, message.tools ?? []);
        send({ type: 'counted', requestId: message.requestId, tokens: prompt.tokens.length, contextLength });
      } catch (error) {
        send({ type: 'error', requestId: message.requestId, code: 'model_load_failed', message: (error as Error).message });
      }
      return;
    case 'generate': {
      const generation: Generation = { requestId: message.requestId, cancelled: false };
      generations.set(message.requestId, generation);
      try {
        await generate(runtime, await load(message.model), message, generation);
      } catch (error) {
        if (error instanceof Cancelled) send({ type: 'cancelled', requestId: message.requestId });
        else send({ type: 'error', requestId: message.requestId, code: 'engine_error', message: (error as Error).message });
      } finally {
        generations.delete(message.requestId);
      }
      return;
    }
    case 'embed': {
      const state = { cancelled: false };
      embeddings.set(message.requestId, state);
      try {
        let model: LlamaModel;
        try {
          model = await load(message.model);
        } catch (error) {
          send({ type: 'error', requestId: message.requestId, code: 'model_load_failed', message: (error as Error).message });
          return;
        }
        if (!(await embed(send, embeddingContexts, model, message, () => state.cancelled))) send({ type: 'cancelled', requestId: message.requestId });
      } finally {
        embeddings.delete(message.requestId);
      }
      return;
    }
    case 'backend':
      try {
        send({ type: 'backend', requestId: message.requestId, gpu: (await llama()).gpu });
      } catch (error) {
        send({ type: 'error', requestId: message.requestId, code: 'engine_error', message: (error as Error).message });
      }
      return;
    case 'cancel': {
      const generation = generations.get(message.requestId);
      if (generation) generation.cancelled = true;
      const embedding = embeddings.get(message.requestId);
      if (embedding) embedding.cancelled = true;
      return;
    }
  }
}

process.on('message', (message: ParentMessage) => {
  void handle(message);
});
process.on('disconnect', () => process.exit(0));
// Ctrl-C in a terminal, a service manager's stop, or a hangup of the terminal signal the whole
// process group. The service ends its runners itself once it has stopped taking work (or goes on,
// for a hangup it ignores); a runner that died first would be taken for a crash, and its tasks'
// restart policies applied while the service stops.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
process.on('SIGHUP', () => {});
send({ type: 'ready', pid: process.pid });
