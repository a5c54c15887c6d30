/**
 * The cost of constrained decoding: tokens per second of a json_schema generation against the
 * same generation unconstrained, both through the runner, same model, prompt and seed,
 * alternating. The schema never completes within the budget, so both run to max_output_tokens.
 * `node dist/bench/grammar.js` runs it alone.
 */
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { defaultThreads } from '../src/config.js';
import type { GenerateRequest, ModelRef } from '../src/engine/engine.js';
import { writeGgufFile } from '../src/engine/gguf-writer.js';
import { RunnerPool } from '../src/engine/runner-pool.js';
import { BENCH_MODEL, buildSyntheticModel, LMSP_TINY, type SyntheticModelOptions } from '../src/engine/synthetic-model.js';
import { makeDataDir } from '../test/helpers/data-dir.js';
import { log, median, runs, type Figure } from './lib.js';

const TOKENS = 400;
const SCHEMA = {
  type: 'object',
  properties: {
    items: { type: 'array', minItems: 500, items: { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, score: { type: 'integer', minimum: 0, maximum: 100 } }, required: ['name', 'score'] } },
  },
  required: ['items'],
};

/** Decode speed from the first output to the last: the prompt and the grammar's parse excluded. */
async function tokensPerSecond(engine: RunnerPool, model: ModelRef, request: Omit<GenerateRequest, 'taskId' | 'resumeTokens'>): Promise<number> {
  const lease = engine.acquire(model)!;
  let first = 0;
  let last = 0;
  let tokens = 0;
  try {
    await lease.load(new AbortController().signal);
    await lease.generate({ ...request, taskId: `task_bench_${Math.random().toString(36).slice(2)}`, resumeTokens: [] }, {
      onPrompt: () => {},
      onOutput: (units) => {
        last = performance.now();
        if (tokens === 0) first = last;
        tokens += units.reduce((sum, unit) => sum + unit.tokens.length, 0);
      },
    }, new AbortController().signal);
  } finally {
    lease.release();
  }
  if (tokens !== TOKENS) throw new Error(`expected ${TOKENS} tokens, got ${tokens}`);
  return (tokens - 1) / ((last - first) / 1000);
}

async function measure(options: SyntheticModelOptions): Promise<{ constrained: number[]; free: number[] }> {
  const dir = makeDataDir('bench-grammar');
  const path = join(dir, 'model.gguf');
  writeGgufFile(path, buildSyntheticModel(options));
  const model = { id: options.name, path, digest: `sha256:${createHash('sha256').update(readFileSync(path)).digest('hex')}` };
  const engine = new RunnerPool({
    slots: 1, maxLoadedModels: 1, keepAliveMs: Infinity,
    settings: { gpu: 'cpu', threads: defaultThreads(), stateDir: join(dir, 'state'), tokenDelayMs: 0 },
    debug: { loadDelayMs: 0, tokenDelayMs: 0, cancelDelayMs: 0, dbMaxPages: 0 },
  });
  const base = { messages: [{ role: 'user' as const, content: 'List many items as JSON.' }], sampling: { temperature: 1, topP: 1, seed: 99, maxOutputTokens: TOKENS } };
  try {
    await tokensPerSecond(engine, model, base); // loads the model
    const constrained: number[] = [];
    const free: number[] = [];
    for (let run = 0; run < runs(); run++) {
      constrained.push(await tokensPerSecond(engine, model, { ...base, format: { type: 'json_schema', schema: SCHEMA } }));
      free.push(await tokensPerSecond(engine, model, base));
      log(`grammar ${options.name} run ${run + 1}: json_schema ${constrained.at(-1)!.toFixed(0)} tok/s, unconstrained ${free.at(-1)!.toFixed(0)} tok/s`);
    }
    return { constrained, free };
  } finally {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function figure(name: string, how: string, target: string, threshold: number | null, result: { constrained: number[]; free: number[] }): Figure {
  const value = median(result.constrained);
  const baseline = median(result.free);
  return { name, value, baseline, unit: 'tok/s', ratio: value / baseline, target, met: threshold === null || value / baseline >= threshold, how, samples: { value: result.constrained, baseline: result.free } };
}

export async function benchGrammar(): Promise<Figure[]> {
  const bench = await measure(BENCH_MODEL);
  const tiny = await measure(LMSP_TINY);
  const how = (model: string) => `${TOKENS} tokens under a json_schema grammar (array of objects) vs unconstrained, seed 99, ${model}, ${defaultThreads()} thread(s), through the runner`;
  return [
    figure('Constrained decoding (tokens/s)', how(`${BENCH_MODEL.embedding} wide ${BENCH_MODEL.layers}-layer ${BENCH_MODEL.tensorType} model`), '>= 0.75', 0.75, bench),
    figure('Constrained decoding, lmsp-tiny (tokens/s)', how('lmsp-tiny'), 'reported', null, tiny),
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  for (const result of await benchGrammar()) console.log(JSON.stringify(result));
}
