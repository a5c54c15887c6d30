/**
 * Streaming overhead: tokens per second of one generation streamed over SSE through the service
 * (every delta committed to the database before it is sent) against node-llama-cpp decoding the
 * same model, prompt and seed directly; and the time to first token of each. Both sides run
 * on the same CPUs: where the service pins its runner (`--cpu-affinity auto`), the direct
 * process is pinned by the same plan to the same CPUs; otherwise neither is. The two alternate
 * within the run (which goes first changes every run), and the spread of the per-run ratios is
 * reported with the medians.
 */
import { join } from 'node:path';
import { writeGgufFile } from '../src/engine/gguf-writer.js';
import { BENCH_MODEL, buildSyntheticModel } from '../src/engine/synthetic-model.js';
import { defaultThreads } from '../src/config.js';
import { affinityForThisMachine, type AffinityPlan } from '../src/engine/cpu-affinity.js';
import { api } from '../test/helpers/service.js';
import { jsonLinesOfScript, log, median, runs, startService, timeResponseStream, type Figure, type TestService } from './lib.js';

const TOKENS = 512;
const SEED = 1234;
const INPUT = 'Tell me everything about the sea.';

interface Measurement {
  ttftMs: number;
  tokensPerSecond: number;
}

async function throughService(service: TestService, modelId: string): Promise<Measurement> {
  const started = performance.now();
  const response = await api(service, '/v1/responses', {
    method: 'POST',
    json: { model: modelId, input: INPUT, stream: true, max_output_tokens: TOKENS, seed: SEED, temperature: 1 },
  });
  const { first, last, tokens } = await timeResponseStream(response);
  if (tokens !== TOKENS) throw new Error(`expected ${TOKENS} tokens, got ${tokens}`);
  // Deltas may carry several tokens; the first delta holds at least the first token.
  return { ttftMs: first - started, tokensPerSecond: (tokens - 1) / ((last - first) / 1000) };
}

/** The plan the service applies to its one runner (default `--parallel 1`, `--cpu-affinity auto`). */
function runnerAffinity(): Promise<AffinityPlan> {
  return affinityForThisMachine('auto', 1, defaultThreads());
}

function direct(modelPath: string, count: number, affinity: AffinityPlan): Promise<Measurement[]> {
  return jsonLinesOfScript<Measurement>('direct-decode', [modelPath, INPUT, String(TOKENS), String(SEED), String(defaultThreads()), String(count)], affinity);
}

async function measure(service: TestService, modelId: string, modelPath: string, affinity: AffinityPlan): Promise<{ service: Measurement[]; direct: Measurement[] }> {
  await throughService(service, modelId); // loads the model
  const viaService: Measurement[] = [];
  const viaDirect: Measurement[] = [];
  for (let run = 0; run < runs(); run++) {
    // The service keeps its model loaded meanwhile, as it would between requests. Which side
    // goes first alternates, so that a slow moment of the machine does not always hit the same one.
    if (run % 2 === 0) {
      viaService.push(await throughService(service, modelId));
      viaDirect.push(...(await direct(modelPath, 1, affinity)));
    } else {
      viaDirect.push(...(await direct(modelPath, 1, affinity)));
      viaService.push(await throughService(service, modelId));
    }
    log(`streaming ${modelId} run ${run + 1}: service ${viaService.at(-1)!.tokensPerSecond.toFixed(0)} tok/s, direct ${viaDirect.at(-1)!.tokensPerSecond.toFixed(0)} tok/s`);
  }
  return { service: viaService, direct: viaDirect };
}

function rateFigure(name: string, how: string, target: string, threshold: number | null, result: { service: Measurement[]; direct: Measurement[] }): Figure {
  const value = median(result.service.map((m) => m.tokensPerSecond));
  const baseline = median(result.direct.map((m) => m.tokensPerSecond));
  // The ratio of each run's pair, measured back to back: its median and its spread.
  const ratios = result.service.map((m, index) => m.tokensPerSecond / result.direct[index]!.tokensPerSecond);
  return {
    name, value, baseline, unit: 'tok/s', ratio: value / baseline, target, met: threshold === null || value / baseline >= threshold, how,
    samples: { value: result.service.map((m) => m.tokensPerSecond), baseline: result.direct.map((m) => m.tokensPerSecond) },
    extra: {
      run_ratios: ratios.map((ratio) => ratio.toFixed(2)).join(' '),
      run_ratio_median: Number(median(ratios).toFixed(2)),
      run_ratio_spread: `${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}`,
    },
  };
}

export async function benchStreaming(): Promise<Figure[]> {
  const service = await startService({ env: { LMSP_LOG_LEVEL: 'warn' } });
  try {
    const modelPath = join(service.dataDir, 'models', 'bench.gguf');
    writeGgufFile(modelPath, buildSyntheticModel(BENCH_MODEL));
    const registered = await api(service, '/v1/models', { method: 'POST', json: { path: 'bench.gguf', id: 'bench' } });
    if (registered.status !== 201) throw new Error(`cannot register the benchmark model: ${registered.status}`);
    const affinity = await runnerAffinity();
    log(affinity.pinned ? `streaming: service runner and direct process both pinned to CPU(s) ${affinity.runnerCpus[0]}` : `streaming: neither side pinned (${affinity.reason})`);
    const bench = await measure(service, 'bench', modelPath, affinity);
    const tiny = await measure(service, 'lmsp-tiny', join(service.dataDir, 'models', 'lmsp-tiny.gguf'), affinity);
    const model = `${BENCH_MODEL.embedding} wide, ${BENCH_MODEL.layers} layers, ${BENCH_MODEL.tensorType}`;
    const threads = `${defaultThreads()} thread(s), ${affinity.pinned ? `both pinned to CPU(s) ${affinity.runnerCpus[0]}` : 'neither pinned'}, alternating which goes first`;
    return [
      rateFigure('Streaming throughput (tokens/s)', `${TOKENS} tokens of a generated ${model} model, seed ${SEED}: SSE through the service (deltas committed first) vs node-llama-cpp directly, ${threads}`, '>= 0.95', 0.95, bench),
      {
        name: 'Time to first token (ms)',
        value: median(bench.service.map((m) => m.ttftMs)),
        baseline: median(bench.direct.map((m) => m.ttftMs)),
        unit: 'ms',
        ratio: median(bench.service.map((m) => m.ttftMs)) / median(bench.direct.map((m) => m.ttftMs)),
        target: 'reported',
        met: true,
        how: 'the same model: from the request (service: POST over HTTP, task committed, context created) or from context creation (direct) to the first token, model loaded in both',
        samples: { value: bench.service.map((m) => m.ttftMs), baseline: bench.direct.map((m) => m.ttftMs) },
      },
      rateFigure('lmsp-tiny decode (tokens/s)', `the same measurement on the built-in model, ${threads}`, 'reported', null, tiny),
    ];
  } finally {
    await service.kill();
  }
}
