/**
 * Slots of one model: aggregate tokens per second of 1, 2, 4 and 8 concurrent streams for
 * (a) the service with `--parallel N` as N runner processes, (b) the service with
 * `--parallel N --parallel-mode sequences`, one runner process whose context has N sequences,
 * and (c) node-llama-cpp directly with N sequences in one context; and the memory of the
 * service with its runners (PSS, which counts the shared pages of the mmap'd weights once) at
 * 4 slots against 1. Every stream decodes the same prompt with a seed of its own.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultThreads } from '../src/config.js';
import { affinityForThisMachine } from '../src/engine/cpu-affinity.js';
import { writeGgufFile } from '../src/engine/gguf-writer.js';
import { BENCH_MODEL, buildSyntheticModel } from '../src/engine/synthetic-model.js';
import { api } from '../test/helpers/service.js';
import { jsonLinesOfScript, log, median, runs, startService, timeResponseStream, type Figure } from './lib.js';

const TOKENS = 256;
const SEED = 4321;
const INPUT = 'Tell me everything about the sea.';
const STREAMS = [1, 2, 4, 8];
const GPU = process.env.BENCH_GPU === '1';

type Design = 'processes' | 'sequences';
const DESIGNS: Design[] = (process.env.BENCH_MULTISEQ_DESIGNS ?? 'processes,sequences').split(',') as Design[];

/** Proportional set size of a process and all its descendants, in MiB (Linux /proc). */
export function pssMiB(pid: number): number {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  let total = 0;
  const pending = [pid];
  while (pending.length > 0) {
    const id = pending.pop()!;
    try {
      total += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${id}/smaps_rollup`, 'utf8'))?.[1] ?? 0) / 1024;
    } catch {
      // gone meanwhile
    }
    pending.push(...(children.get(id) ?? []));
  }
  return total;
}

async function stream(service: { url: string; token: string }, seed: number, tokens: number): Promise<{ last: number; tokens: number }> {
  const response = await api(service, '/v1/responses', {
    method: 'POST',
    json: { model: 'bench', input: INPUT, stream: true, max_output_tokens: tokens, seed, temperature: 1 },
  });
  if (response.status !== 200) throw new Error(`stream refused: ${response.status} ${await response.text()}`);
  const { last, tokens: generated } = await timeResponseStream(response);
  return { last, tokens: generated };
}

/** N streams at once through a service started with `--parallel N`; its PSS while loaded. */
async function throughService(design: Design, streams: number, modelsDir: string): Promise<{ rate: number; pss: number }> {
  const service = await startService({
    args: ['--parallel', String(streams), '--models-dir', modelsDir, ...(GPU ? [] : ['--gpu', 'cpu'])],
    env: { LMSP_LOG_LEVEL: 'warn', LMSP_PARALLEL_MODE: design },
  });
  try {
    const registered = await api(service, '/v1/models', { method: 'POST', json: { path: 'bench.gguf', id: 'bench' } });
    if (registered.status !== 201) throw new Error(`cannot register the benchmark model: ${registered.status}`);
    // Every slot loads the model first (N runners, or one with N sequences).
    await Promise.all(Array.from({ length: streams }, (_, index) => stream(service, SEED + index, 2)));
    const started = performance.now();
    const results = await Promise.all(Array.from({ length: streams }, (_, index) => stream(service, SEED + index, TOKENS)));
    const total = results.reduce((sum, result) => sum + result.tokens, 0);
    const rate = total / ((Math.max(...results.map((result) => result.last)) - started) / 1000);
    return { rate, pss: pssMiB(service.pid) };
  } finally {
    await service.kill();
  }
}

async function direct(modelPath: string): Promise<Map<number, { rate: number; sameAsAlone: boolean }>> {
  const args = [modelPath, INPUT, String(TOKENS), String(SEED), String(defaultThreads()), STREAMS.join(','), GPU ? 'gpu' : 'cpu'];
  // Pinned as the service pins its one runner at `--parallel 1` (and with sequences at any N).
  const lines = await jsonLinesOfScript<{ streams: number; tokensPerSecond: number; sameAsAlone: boolean }>(
    'direct-multiseq', args, affinityForThisMachine('auto', 1, defaultThreads()));
  return new Map(lines.map((line) => [line.streams, { rate: line.tokensPerSecond, sameAsAlone: line.sameAsAlone }]));
}

export async function benchMultiseq(): Promise<Figure[]> {
  const modelsDir = mkdtempSync(join(tmpdir(), 'lmsp-bench-slots-'));
  try {
    const modelPath = join(modelsDir, 'bench.gguf');
    writeGgufFile(modelPath, buildSyntheticModel(BENCH_MODEL));
    // Each run measures every design at every N once, in an order that changes from run to run,
    // so that a slow moment of the shared machine does not always hit the same design.
    const samples = new Map<string, Array<{ rate: number; pss: number }>>();
    const directRuns: Array<Map<number, { rate: number; sameAsAlone: boolean }>> = [];
    const add = (key: string, sample: { rate: number; pss: number }) => samples.set(key, [...(samples.get(key) ?? []), sample]);
    for (let run = 0; run < runs(); run++) {
      const order: string[] = run % 2 === 0 ? ['direct', ...DESIGNS] : [...[...DESIGNS].reverse(), 'direct'];
      for (const design of order) {
        if (design === 'direct') {
          const byStreams = await direct(modelPath);
          directRuns.push(byStreams);
          for (const streams of STREAMS) {
            add(`direct:${streams}`, { rate: byStreams.get(streams)!.rate, pss: 0 });
            log(`slots run ${run + 1}: direct, ${streams} sequence(s): ${byStreams.get(streams)!.rate.toFixed(0)} tok/s (first stream same as alone: ${byStreams.get(streams)!.sameAsAlone})`);
          }
          continue;
        }
        for (const streams of STREAMS) {
          const result = await throughService(design as Design, streams, modelsDir);
          add(`${design}:${streams}`, result);
          log(`slots run ${run + 1}: ${design}, --parallel ${streams}: ${result.rate.toFixed(0)} tok/s, PSS ${result.pss.toFixed(0)} MiB`);
        }
      }
    }
    const measured = new Map([...samples].map(([key, list]) => [key, { rate: median(list.map((s) => s.rate)), pss: median(list.map((s) => s.pss)), rates: list.map((s) => s.rate) }]));
    const model = `a generated ${BENCH_MODEL.embedding} wide, ${BENCH_MODEL.layers} layers, ${BENCH_MODEL.tensorType} model`;
    const figures: Figure[] = STREAMS.map((streams) => {
      const byDesign = DESIGNS.map((design) => ({ design, rate: measured.get(`${design}:${streams}`)!.rate }));
      const best = Math.max(...byDesign.map((entry) => entry.rate), measured.get(`direct:${streams}`)!.rate);
      const chosen = byDesign.reduce((a, b) => (b.rate > a.rate ? b : a));
      return {
        name: `${streams} concurrent stream(s), aggregate (tokens/s)`,
        value: chosen.rate,
        baseline: best,
        unit: 'tok/s',
        ratio: chosen.rate / best,
        target: '>= 0.9 of the best',
        met: chosen.rate / best >= 0.9,
        how: `${streams} streams of ${TOKENS} tokens of ${model}, seeds ${SEED}+i, all started at once: the faster service design against the best of the service designs and node-llama-cpp directly with ${streams} sequences in one context (pinned as the service pins one runner), ${defaultThreads()} thread(s) per runner, ${GPU ? 'GPU' : 'CPU'}`,
        samples: { value: measured.get(`${chosen.design}:${streams}`)!.rates, baseline: [best] },
        extra: {
          faster: chosen.design,
          ...Object.fromEntries(byDesign.map((entry) => [entry.design, Number(entry.rate.toFixed(1))])),
          direct: Number(measured.get(`direct:${streams}`)!.rate.toFixed(1)),
          ...Object.fromEntries([...DESIGNS, 'direct'].map((design) => [`${design}_runs`, measured.get(`${design}:${streams}`)!.rates.map((rate) => rate.toFixed(0)).join(' ')])),
          direct_first_stream_same_as_alone: directRuns.map((byStreams) => String(byStreams.get(streams)!.sameAsAlone)).join(' '),
        },
      };
    });
    for (const design of DESIGNS) {
      const one = measured.get(`${design}:1`)!.pss;
      const four = measured.get(`${design}:4`)!.pss;
      figures.push({
        name: `PSS at 4 slots, ${design} (MiB)`,
        value: four,
        baseline: one,
        unit: 'MiB',
        ratio: four / one,
        target: 'reported',
        met: true,
        how: `sum of Pss (smaps_rollup) of the service and its runners after the 4-stream run, against the same at 1 slot, ${model} (medians)`,
        samples: { value: [four], baseline: [one] },
      });
    }
    return figures;
  } finally {
    rmSync(modelsDir, { recursive: true, force: true });
  }
}
