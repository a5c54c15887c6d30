/**
 * One generation in the runner: the prompt, token-by-token sampling (under a grammar when the
 * output is constrained), output shaping, and the exact resume of LMSP 7.5, which rests on
 * these facts, each measured:
 * - the prompt is evaluated in the same chunks every time, and generated tokens one at a time,
 *   so a replay computes exactly what the first run computed;
 * - the seed of each sampled token depends only on the request's seed and its position;
 * - a saved sequence state (KV cache) is a prefix of that same computation, so loading it and
 *   replaying the tokens after it is exact too, and much faster than replaying everything;
 * - a grammar state is a function of the tokens accepted, and the output split (content, tool
 *   calls, held text) a function of the text, so both are rebuilt by replaying the snapshot.
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { TokenBias, type LlamaContextSequence, type LlamaGrammarEvaluationState, type LlamaModel, type Token } from 'node-llama-cpp';
import { sleep } from '../time.js';
import { Detokenizer, replayGroups } from './detokenizer.js';
import { constraintGrammar, type ConstraintGrammar } from './grammar/constraint.js';
import { UnsupportedSchemaError } from './grammar/schema-keywords.js';
import { acceptToken, grammarFor, newGrammarState } from './grammar-state.js';
import { OutputShaper } from './output-shaper.js';
import { OutputSplitter } from './output-splitter.js';
import { renderPrompt } from './prompt.js';
import { TEMPLATE_REFUSAL } from '../domain/errors.js';
import type { GenerateMessage, OutputUnitMessage, RunnerMessage, RunnerSettings } from './protocol.js';
import { positionSeed } from './sampling.js';
import { PROMPT_CHUNK, type SequenceSource } from './sequences.js';
import { digestPath, statePath, temporaryStatePath } from './state-files.js';
import { vocabularyTokens } from './vocabulary.js';
import type { FinishReason, Sampling } from './types.js';

/** Sequence states are saved no more often than this, and at most ~2% of generation time. */
const MIN_STATE_INTERVAL_MS = 250;
const STATE_COST_FACTOR = 50;

export class Cancelled extends Error {}

export interface Generation {
  requestId: number;
  cancelled: boolean;
}

function throwIfCancelled(generation: Generation): void {
  if (generation.cancelled) throw new Cancelled();
}

/** Picks each next token: plainly, or through a grammar state. */
interface Sampler {
  /** Evaluates `token` and samples the token at `position`. */
  step(sequence: LlamaContextSequence, token: Token, position: number): Promise<Token | null>;
  /** Tokens evaluated as the last prompt chunk together with the first sample, if any. */
  readonly promptTail: number;
}

/** A request's sampling with what the runner builds from it once per generation. */
interface RunnerSampling extends Sampling {
  tokenBias?: TokenBias;
}

/**
 * The number of tokens of the model's vocabulary: the tokenizer's list, or the rows of the token
 * embeddings; 0 when the file says neither. A token id past it must never reach the tokenizer.
 */
function vocabularySizeOf(model: LlamaModel): number {
  const tokens = vocabularyTokens(model);
  if (tokens) return tokens.length;
  const embeddings = model.fileInfo.fullTensorInfo?.find((tensor) => tensor.name === 'token_embd.weight');
  return embeddings?.dimensions.length === 2 ? Number(embeddings.dimensions[1]) : 0;
}

/**
 * OpenAI's `logit_bias` for node-llama-cpp: each bias is added to its token's logit, and -100
 * bans the token, as OpenAI says it should. Ids outside the vocabulary are left out, as
 * llama.cpp's server leaves them; node-llama-cpp leaves out end-of-generation tokens.
 *
 * Under a grammar (`constrained`), -100 is a bias like any other, not a ban: a ban of every token
 * the grammar allows at some point (its `{`) left the sampler nothing to draw from, and what it
 * drew then was outside the grammar (LMSP 6.1: the value is valid, whatever the model). Such a
 * token is still drawn only when the grammar allows nothing else.
 */
function tokenBiasOf(model: LlamaModel, logitBias: Sampling['logitBias'], constrained: boolean): TokenBias | undefined {
  if (!logitBias || logitBias.length === 0) return undefined;
  const vocabularySize = vocabularySizeOf(model);
  const bias = new TokenBias(model.tokenizer);
  for (const [token, value] of logitBias) {
    if (token < vocabularySize) bias.set(token as Token, value <= -100 && !constrained ? 'never' : { logit: value });
  }
  return bias;
}

/**
 * The sampling of the token at `position`, given the tokens generated before it (`generated`,
 * resumed ones included): penalties count those tokens only, never the prompt, so a resumed
 * generation samples exactly as an uninterrupted one (LMSP 7.5).
 */
function sampleOptions(sampling: RunnerSampling, position: number, generated: readonly Token[]) {
  const options = {
    temperature: sampling.temperature, topP: sampling.topP, topK: 0, minP: 0, seed: positionSeed(sampling.seed, position),
    ...(sampling.tokenBias ? { tokenBias: sampling.tokenBias } : {}),
  };
  const frequencyPenalty = sampling.frequencyPenalty ?? 0;
  const presencePenalty = sampling.presencePenalty ?? 0;
  if (frequencyPenalty === 0 && presencePenalty === 0) return options;
  // `penalty: 1` turns off llama.cpp's multiplicative repeat penalty: only OpenAI's two apply.
  const punishTokens = generated.slice(0, position) as Token[];
  return { ...options, repeatPenalty: { punishTokens, maxPunishTokens: punishTokens.length, penalty: 1, frequencyPenalty, presencePenalty } };
}

function plainSampler(sampling: RunnerSampling, generated: readonly Token[]): Sampler {
  return {
    promptTail: PROMPT_CHUNK,
    async step(sequence, token, position) {
      const results = await sequence.controlledEvaluate([[token, { generateNext: { token: true, options: sampleOptions(sampling, position, generated) } }]]);
      return results[0]?.next?.token ?? null;
    },
  };
}

/**
 * Sampling under a grammar goes through `evaluate`, which takes a grammar state, one token at a
 * time; the last prompt token is evaluated alone, so a replay evaluates it the same way.
 */
function grammarSampler(sampling: RunnerSampling, state: LlamaGrammarEvaluationState, generated: readonly Token[]): Sampler {
  return {
    promptTail: 1,
    async step(sequence, token, position) {
      const iterator = sequence.evaluate([token], { ...sampleOptions(sampling, position, generated), grammarEvaluationState: state, yieldEogToken: true });
      try {
        const next = await iterator.next();
        return next.done ? null : next.value;
      } finally {
        await iterator.return();
      }
    },
  };
}

/** Evaluates the prompt in fixed chunks; with a plain sampler the last chunk samples the first token. */
async function evaluatePrompt(sequence: LlamaContextSequence, prompt: readonly Token[], generation: Generation,
  sampler: Sampler, sampling: RunnerSampling | null): Promise<Token | null> {
  const chunked = sampler.promptTail === 1 ? prompt.slice(0, -1) : prompt;
  let next: Token | null = null;
  for (let start = 0; start < chunked.length; start += PROMPT_CHUNK) {
    throwIfCancelled(generation);
    const chunk = chunked.slice(start, start + PROMPT_CHUNK);
    const isLast = start + PROMPT_CHUNK >= chunked.length;
    if (isLast && sampling && sampler.promptTail !== 1) {
      const input = chunk.map((token, index) => (index === chunk.length - 1
        ? [token, { generateNext: { token: true, options: sampleOptions(sampling, 0, []) } }] as const
        : token));
      const results = await sequence.controlledEvaluate(input as Parameters<LlamaContextSequence['controlledEvaluate']>[0]);
      next = results[chunk.length - 1]?.next?.token ?? null;
    } else {
      await sequence.controlledEvaluate(chunk);
    }
  }
  if (sampler.promptTail === 1 && prompt.length > 0) {
    throwIfCancelled(generation);
    if (sampling) next = await sampler.step(sequence, prompt.at(-1)!, 0);
    else await sequence.controlledEvaluate([prompt.at(-1)!]);
  }
  return next;
}

async function fileDigest(path: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  return hash.digest('hex');
}

/**
 * Saves the sequence's state, with its digest. A state is a cache (the committed tokens rebuild
 * it), so nothing is synced to disk: after a power cut or a disk error, a state whose bytes are
 * not the ones saved fails its digest and is rebuilt rather than resumed from, which would change
 * the text (LMSP 7.5). The state is renamed into place before its digest: in between, a crash
 * leaves a state without its own digest, which is not trusted either.
 */
async function saveState(settings: RunnerSettings, sequence: LlamaContextSequence, taskId: string): Promise<void> {
  mkdirSync(settings.stateDir, { recursive: true, mode: 0o700 });
  const temporary = temporaryStatePath(settings.stateDir, taskId);
  await sequence.saveStateToFile(temporary);
  const digest = await fileDigest(temporary);
  rmSync(digestPath(settings.stateDir, taskId), { force: true });
  renameSync(temporary, statePath(settings.stateDir, taskId));
  writeFileSync(digestPath(settings.stateDir, taskId), digest, { mode: 0o600 });
}

/** Removes a task's saved state, its digest and a state half written; what cannot be removed is not trusted (no digest). */
function dropState(settings: RunnerSettings, taskId: string): void {
  for (const path of [digestPath(settings.stateDir, taskId), statePath(settings.stateDir, taskId), temporaryStatePath(settings.stateDir, taskId)]) {
    try {
      rmSync(path, { force: true });
    } catch {
      // a folder that cannot be read: the next save or resume meets the same and does without
    }
  }
}

/** Whether the saved state is whole: its digest is there and matches. */
async function stateIsWhole(settings: RunnerSettings, taskId: string): Promise<boolean> {
  try {
    return readFileSync(digestPath(settings.stateDir, taskId), 'utf8') === await fileDigest(statePath(settings.stateDir, taskId));
  } catch {
    return false;
  }
}

/**
 * Brings a fresh sequence to "prompt + resume[0..m-1) evaluated" and samples position m from
 * resume[m-1], using a saved state when one matches.
 */
async function restore(settings: RunnerSettings, sequence: LlamaContextSequence, prompt: readonly Token[], resume: readonly Token[],
  taskId: string, sampler: Sampler, generation: Generation): Promise<Token | null> {
  const expected = [...prompt, ...resume];
  let evaluated = 0; // tokens of `expected` in the sequence
  const path = statePath(settings.stateDir, taskId);
  // A state that is not the one saved (damaged on disk) is dropped: the tokens rebuild it.
  if (existsSync(path) && !await stateIsWhole(settings, taskId)) rmSync(path, { force: true });
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
    await evaluatePrompt(sequence, prompt, generation, sampler, null);
    evaluated = prompt.length;
  }
  for (let index = evaluated; index < target; index++) {
    throwIfCancelled(generation);
    await sequence.controlledEvaluate([expected[index]!]);
  }
  return sampler.step(sequence, expected[target]!, resume.length);
}

export interface GenerationRuntime {
  settings: RunnerSettings;
  send(message: RunnerMessage): void;
  grammar(gbnf: string): ReturnType<typeof grammarFor>;
  /** A context per generation, or a sequence of the model's shared context. */
  sequences: SequenceSource;
}

function constraintOf(message: GenerateMessage, syntax: ReturnType<typeof renderPrompt>['toolCallSyntax']): ConstraintGrammar {
  const tools = message.tools ?? [];
  const format = message.format ?? { type: 'text' };
  if (tools.length === 0 && format.type === 'text') return { grammar: null, layout: 'content' };
  return constraintGrammar({ format, tools, toolChoice: message.toolChoice ?? 'auto', parallelToolCalls: message.parallelToolCalls ?? true }, syntax);
}

export async function generate(runtime: GenerationRuntime, model: LlamaModel, message: GenerateMessage, generation: Generation): Promise<void> {
  const { requestId, taskId } = message;
  const { settings, send } = runtime;
  const tools = message.tools ?? [];
  let prompt: ReturnType<typeof renderPrompt>;
  try {
    prompt = renderPrompt(model, message.messages, tools);
  } catch (error) {
    send({ type: 'error', requestId, code: 'engine_error', message: `${TEMPLATE_REFUSAL}${(error as Error).message}` });
    return;
  }
  const contextLength = model.trainContextSize;
  if (prompt.tokens.length + message.sampling.maxOutputTokens > contextLength) {
    send({ type: 'error', requestId, code: 'context_length_exceeded',
      message: `the input (${prompt.tokens.length} tokens) and max_output_tokens (${message.sampling.maxOutputTokens}) exceed the model context (${contextLength})` });
    return;
  }
  let constraint: ConstraintGrammar;
  try {
    constraint = constraintOf(message, prompt.toolCallSyntax);
  } catch (error) {
    if (!(error instanceof UnsupportedSchemaError)) throw error;
    send({ type: 'error', requestId, code: 'engine_error', message: `unsupported schema: ${error.message} (${error.keyword} at ${error.pointer || '/'})` });
    return;
  }
  const grammarState = constraint.grammar === null ? null : newGrammarState(model, await runtime.grammar(constraint.grammar));
  const sampling: RunnerSampling = { ...message.sampling, tokenBias: tokenBiasOf(model, message.sampling.logitBias, grammarState !== null) };
  // The tokens generated so far, resumed ones first: what the penalties count.
  const generatedTokens: Token[] = [...(message.resumeTokens as Token[])];
  const sampler = grammarState ? grammarSampler(sampling, grammarState, generatedTokens) : plainSampler(sampling, generatedTokens);
  send({ type: 'prompt', requestId, inputTokens: prompt.tokens.length });
  const slot = await runtime.sequences.acquire(model, prompt.tokens.length + sampling.maxOutputTokens);
  const splitter = new OutputSplitter(constraint.layout, prompt.toolCallSyntax, tools.map((tool) => tool.name), message.stop ?? []);
  const shaper = new OutputShaper(splitter);
  const detokenizer = new Detokenizer(model);
  const emit = (...units: Array<OutputUnitMessage | null>) => {
    const ready = units.filter((unit): unit is OutputUnitMessage => unit !== null);
    if (ready.length > 0) send({ type: 'output', requestId, units: ready });
  };
  const done = (finishReason: FinishReason) => {
    send({ type: 'done', requestId, finishReason, ...(tools.length > 0 ? { toolCalls: splitter.toolCalls() } : {}) });
  };
  try {
    const sequence = slot.sequence;
    const resume = message.resumeTokens as Token[];
    if (resume.length > 0) {
      shaper.replay(replayGroups(detokenizer, resume));
      // The committed output already ended at a stop sequence: nothing more to write.
      if (shaper.stopped) {
        send({ type: 'generating', requestId });
        done('stop');
        return;
      }
      if (grammarState) for (const token of resume) acceptToken(grammarState, token);
    }
    // LMSP_DEBUG_TOKEN_DELAY_MS: each token, the first included, comes at least this long after
    // the one before (the first: after the generation started).
    let lastTokenAt = performance.now();
    let next = resume.length === 0
      ? await evaluatePrompt(sequence, prompt.tokens, generation, sampler, sampling)
      : await restore(settings, sequence, prompt.tokens, resume, taskId, sampler, generation);
    send({ type: 'generating', requestId });
    const endsGeneration = (token: Token | null) => token === null || model.isEogToken(token) || prompt.stopTokens.has(token);
    let generated = resume.length;
    let lastSaveAt = performance.now();
    let saveCost = 0;
    for (;;) {
      if (settings.tokenDelayMs > 0) {
        await sleep(settings.tokenDelayMs - (performance.now() - lastTokenAt));
        lastTokenAt = performance.now();
      }
      throwIfCancelled(generation);
      if (next === null || endsGeneration(next)) {
        const rest = detokenizer.flush();
        emit(rest ? shaper.push(rest) : null, shaper.finish());
        done('stop');
        return;
      }
      const token: Token = next;
      generated += 1;
      generatedTokens.push(token);
      const group = detokenizer.push(token);
      if (group) emit(shaper.push(group));
      if (shaper.stopped) {
        done('stop');
        return;
      }
      if (generated >= sampling.maxOutputTokens) {
        const rest = detokenizer.flush();
        const last = rest ? shaper.push(rest) : null;
        emit(last, shaper.stopped ? null : shaper.finish());
        // A value or call that the last allowed token completed was not cut: under a grammar
        // the token after it is sampled (seeded by position, so the same one a longer limit
        // would get), and if it ends the generation, so does this one, as that run would.
        const cut = !shaper.stopped && !(grammarState && endsGeneration(await slot.step(() => sampler.step(sequence, token, generated))));
        done(cut ? 'max_output_tokens' : 'stop');
        return;
      }
      // The sequence now holds prompt + tokens [0, generated - 1): a valid resume point.
      const now = performance.now();
      if (generated > 1 && now - lastSaveAt >= Math.max(MIN_STATE_INTERVAL_MS, saveCost * STATE_COST_FACTOR)) {
        // The other sequences of a shared context take their steps meanwhile.
        try {
          await slot.aside(() => saveState(settings, sequence, taskId));
        } catch {
          // A state is a cache: one that cannot be written (a full disk) leaves none to resume
          // from, and a resume rebuilds it from the committed tokens; the generation goes on.
          dropState(settings, taskId);
        }
        lastSaveAt = performance.now();
        saveCost = lastSaveAt - now;
      }
      throwIfCancelled(generation);
      next = await slot.step(() => sampler.step(sequence, token, generated));
    }
  } finally {
    dropState(settings, taskId);
    await slot.release();
  }
}
