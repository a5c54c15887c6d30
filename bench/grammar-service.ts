/**
 * The cost of constrained decoding as a client sees it: tokens per second of a streamed
 * `text.format: json_schema` response against the same response without a format, through the
 * service (HTTP, task, deltas committed before they are sent), same model, prompt and seed,
 * alternating. The schema never completes within the budget, so both run to max_output_tokens.
 * `node dist/bench/grammar-service.js` runs it alone.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { defaultThreads } from '../src/config.js';
import { writeGgufFile } from '../src/engine/gguf-writer.js';
import { BENCH_MODEL, buildSyntheticModel } from '../src/engine/synthetic-model.js';
import { api } from '../test/helpers/service.js';
import { log, median, runs, startService, timeResponseStream, type Figure, type TestService } from './lib.js';

const TOKENS = 400;
const SEED = 99;
const SCHEMA = {
  type: 'object',
  properties: {
    items: { type: 'array', minItems: 500, items: { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, score: { type: 'integer', minimum: 0, maximum: 100 } }, required: ['name', 'score'] } },
  },
  required: ['items'],
};

/** Decode speed from the first delta to the last: the prompt and the grammar's parse excluded. */
async function tokensPerSecond(service: TestService, model: string, constrained: boolean): Promise<number> {
  const response = await api(service, '/v1/responses', {
    method: 'POST',
    json: {
      model, input: 'List many items as JSON.', stream: true, max_output_tokens: TOKENS, seed: SEED, temperature: 1,
      ...(constrained ? { text: { format: { type: 'json_schema', name: 'items', schema: SCHEMA } } } : {}),
    },
  });
  const { first, last, tokens } = await timeResponseStream(response);
  if (tokens !== TOKENS) throw new Error(`expected ${TOKENS} tokens, got ${tokens}`);
  return (tokens - 1) / ((last - first) / 1000);
}

async function measure(service: TestService, model: string): Promise<{ constrained: number[]; free: number[] }> {
  await tokensPerSecond(service, model, false); // loads the model
  const constrained: number[] = [];
  const free: number[] = [];
  for (let run = 0; run < runs(); run++) {
    constrained.push(await tokensPerSecond(service, model, true));
    free.push(await tokensPerSecond(service, model, false));
    log(`grammar through the service, ${model} run ${run + 1}: json_schema ${constrained.at(-1)!.toFixed(0)} tok/s, unconstrained ${free.at(-1)!.toFixed(0)} tok/s`);
  }
  return { constrained, free };
}

function figure(name: string, how: string, target: string, threshold: number | null, result: { constrained: number[]; free: number[] }): Figure {
  const value = median(result.constrained);
  const baseline = median(result.free);
  return { name, value, baseline, unit: 'tok/s', ratio: value / baseline, target, met: threshold === null || value / baseline >= threshold, how, samples: { value: result.constrained, baseline: result.free } };
}

export async function benchGrammarService(): Promise<Figure[]> {
  const service = await startService({ env: { LMSP_LOG_LEVEL: 'warn' } });
  try {
    writeGgufFile(join(service.dataDir, 'models', 'bench.gguf'), buildSyntheticModel(BENCH_MODEL));
    const registered = await api(service, '/v1/models', { method: 'POST', json: { path: 'bench.gguf', id: 'bench' } });
    if (registered.status !== 201) throw new Error(`cannot register the benchmark model: ${registered.status}`);
    const bench = await measure(service, 'bench');
    const tiny = await measure(service, 'lmsp-tiny');
    const how = (model: string) => `${TOKENS} tokens of a streamed response with text.format json_schema (array of objects) vs without, seed ${SEED}, ${model}, ${defaultThreads()} thread(s), through the service`;
    return [
      figure('Constrained decoding through the service (tokens/s)', how(`${BENCH_MODEL.embedding} wide ${BENCH_MODEL.layers}-layer ${BENCH_MODEL.tensorType} model`), '>= 0.75', 0.75, bench),
      figure('Constrained decoding through the service, lmsp-tiny (tokens/s)', how('lmsp-tiny'), 'reported', null, tiny),
    ];
  } finally {
    await service.kill();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  for (const result of await benchGrammarService()) console.log(JSON.stringify(result));
}
