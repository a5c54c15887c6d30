/**
 * Slots of one model: aggregate tokens per second of 1, 2, 4 and 8 concurrent streams for
 * (a) the service with `--parallel N` as N runner processes, (b) the service with
 * `--parallel N --parallel-mode sequences`, one runner process whose context has N sequences,
 * and (c) node-llama-cpp directly with N sequences in one context; and the memory of the
 * service with its runners (PSS, which counts the shared pages of the mmap'd weights once) at
 * 4 slots against 1. Every stream decodes the same prompt with a seed of its own.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultThreads } from '../src/config.js';
import { affinityForThisMachine } from '../src/engine/cpu-affinity.js';
import { chooseParallelMode } from '../src/engine/parallel-mode.js';
import type { RunnerSettings } from '../src/engine/protocol.js';
import { writeGgufFile } from '../src/engine/gguf-writer.js';
import { BENCH_MODEL, buildSyntheticModel, type SyntheticModelOptions } from '../src/engine/synthetic-model.js';
import { api } from '../test/helpers/service.js';
import { jsonLinesOfScript, log, median, runs, startService, timeResponseStream, type Figure } from './lib.js';

const TOKENS = Number(process.env.BENCH_SLOTS_TOKENS ?? 256);
const SEED = 4321;
const INPUT = 'Tell me everything about the sea.';
const STREAMS = (process.env.BENCH_SLOTS_STREAMS ?? '1,2,4,8').split(',').map(Number);
/**
 * `BENCH_GPU=1` lets llama.cpp pick its backend (`--gpu auto`), `BENCH_GPU=cuda` or `vulkan` names
 * one; unset, everything runs on the CPU.
 */
const GPU_SETTING = process.env.BENCH_GPU === '1' ? 'auto' : process.env.BENCH_GPU || null;
const GPU = GPU_SETTING !== null;

/**
 * The model every stream decodes: the streaming benchmark's, or `BENCH_SLOTS_MODEL=WIDTHxLAYERS`
 * (for a GPU, where a 512-wide model measures kernel launches more than the weights).
 */
function slotsModel(): SyntheticModelOptions {
  const wanted = /^(\d+)x(\d+)$/.exec(process.env.BENCH_SLOTS_MODEL ?? '');
  if (!wanted) return BENCH_MODEL;
  const embedding = Number(wanted[1]);
  const layers = Number(wanted[2]);
  return { ...BENCH_MODEL, name: `lmsp-bench-${embedding}x${layers}`, embedding, layers, heads: embedding / 64, feedForward: Math.round((embedding * 11) / 4 / 64) * 64 };
}
const MODEL = slotsModel();

/** GPU memory in use on the machine, in MiB, where `nvidia-smi` answers (null elsewhere). */
function gpuMemoryUsedMiB(): number | null {
  const answer = spawnSync('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits'], { encoding: 'utf8' });
  if (answer.status !== 0) return null;
  return answer.stdout.trim().split('\n').reduce((sum, line) => sum + Number(line), 0);
}

/**
 * GPU memory in use once it stops changing (the runners of the service measured before exit
 * after it, and give their memory back as they go), within 15 s.
 */
async function settledGpuMemoryMiB(): Promise<number | null> {
  let last = gpuMemoryUsedMiB();
  for (let tries = 0; last !== null && tries < 60; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    const now = gpuMemoryUsedMiB();
    if (now === last) return now;
    last = now;
  }
  return last;
}

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

interface ServiceSample {
  rate: number;
  pss: number;
  /** GPU memory the service's runners added, in MiB (NaN without a GPU that reports it). */
  gpu: number;
}

/** N streams at once through a service started with `--parallel N`; its PSS (and GPU memory) while loaded. */
async function throughService(design: Design, streams: number, modelsDir: string): Promise<ServiceSample> {
  const gpuBefore = GPU ? await settledGpuMemoryMiB() : null;
  const service = await startService({
    args: ['--parallel', String(streams), '--models-dir', modelsDir, '--gpu', GPU_SETTING ?? 'cpu'],
    env: { LMSP_LOG_LEVEL: 'warn', LMSP_PARALLEL_MODE: design },
    timeoutMs: 120_000,
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
    const gpuAfter = gpuBefore === null ? null : gpuMemoryUsedMiB();
    return { rate, pss: pssMiB(service.pid), gpu: gpuBefore === null || gpuAfter === null ? Number.NaN : gpuAfter - gpuBefore };
  } finally {
    await service.kill();
  }
}

async function direct(modelPath: string): Promise<Map<number, { rate: number; sameAsAlone: boolean }>> {
  const args = [modelPath, INPUT, String(TOKENS), String(SEED), String(defaultThreads()), STREAMS.join(','), GPU_SETTING ?? 'cpu'];
  // Pinned as the service pins its one runner at `--parallel 1` (and with sequences at any N).
  const lines = await jsonLinesOfScript<{ streams: number; tokensPerSecond: number; sameAsAlone: boolean }>(
    'direct-multiseq', args, await affinityForThisMachine('auto', 1, defaultThreads()));
  return new Map(lines.map((line) => [line.streams, { rate: line.tokensPerSecond, sameAsAlone: line.sameAsAlone }]));
}

export async function benchMultiseq(): Promise<Figure[]> {
  const modelsDir = mkdtempSync(join(tmpdir(), 'lmsp-bench-slots-'));
  try {
    const modelPath = join(modelsDir, 'bench.gguf');
    writeGgufFile(modelPath, buildSyntheticModel(MODEL));
    // Each run measures every design at every N once, in an order that changes from run to run,
    // so that a slow moment of the shared machine does not always hit the same design.
    const samples = new Map<string, ServiceSample[]>();
    const directRuns: Array<Map<number, { rate: number; sameAsAlone: boolean }>> = [];
    const add = (key: string, sample: ServiceSample) => samples.set(key, [...(samples.get(key) ?? []), sample]);
    for (let run = 0; run < runs(); run++) {
      const order: string[] = run % 2 === 0 ? ['direct', ...DESIGNS] : [...[...DESIGNS].reverse(), 'direct'];
      for (const design of order) {
        if (design === 'direct') {
          const byStreams = await direct(modelPath);
          directRuns.push(byStreams);
          for (const streams of STREAMS) {
            add(`direct:${streams}`, { rate: byStreams.get(streams)!.rate, pss: 0, gpu: Number.NaN });
            log(`slots run ${run + 1}: direct, ${streams} sequence(s): ${byStreams.get(streams)!.rate.toFixed(0)} tok/s (first stream same as alone: ${byStreams.get(streams)!.sameAsAlone})`);
          }
          continue;
        }
        for (const streams of STREAMS) {
          const result = await throughService(design as Design, streams, modelsDir);
          add(`${design}:${streams}`, result);
          log(`slots run ${run + 1}: ${design}, --parallel ${streams}: ${result.rate.toFixed(0)} tok/s, PSS ${result.pss.toFixed(0)} MiB${Number.isNaN(result.gpu) ? '' : `, GPU memory +${result.gpu.toFixed(0)} MiB`}`);
        }
      }
    }
    const measured = new Map([...samples].map(([key, list]) => [key, { rate: median(list.map((s) => s.rate)), pss: median(list.map((s) => s.pss)), gpu: median(list.map((s) => s.gpu)), rates: list.map((s) => s.rate) }]));
    const model = `a generated ${MODEL.embedding} wide, ${MODEL.layers} layers, ${MODEL.tensorType} model`;
    const backend = GPU ? `GPU (--gpu ${GPU_SETTING})` : 'CPU';
    const figures: Figure[] = [];
    for (const streams of STREAMS) {
      const byDesign = DESIGNS.map((design) => ({ design, rate: measured.get(`${design}:${streams}`)!.rate }));
      const best = Math.max(...byDesign.map((entry) => entry.rate), measured.get(`direct:${streams}`)!.rate);
      const faster = byDesign.reduce((a, b) => (b.rate > a.rate ? b : a));
      // The design `--parallel-mode auto` takes here, by the service's own rule (the faster one
      // where this run did not measure it).
      const rule = await chooseParallelMode('auto', streams, GPU ? (GPU_SETTING as RunnerSettings['gpu']) : 'cpu', async () => (GPU ? 'gpu' : false));
      const chosen = byDesign.find((entry) => entry.design === rule.mode) ?? faster;
      figures.push({
        name: `${streams} concurrent stream(s), aggregate (tokens/s)`,
        value: chosen.rate,
        baseline: best,
        unit: 'tok/s',
        ratio: chosen.rate / best,
        target: '>= 0.9 of the best',
        met: chosen.rate / best >= 0.9,
        how: `${streams} streams of ${TOKENS} tokens of ${model}, seeds ${SEED}+i, all started at once: the design --parallel-mode auto takes (${chosen.design}: ${rule.reason}) against the best of the service designs and node-llama-cpp directly with ${streams} sequences in one context (pinned as the service pins one runner), ${defaultThreads()} thread(s) per runner, ${backend}`,
        samples: { value: measured.get(`${chosen.design}:${streams}`)!.rates, baseline: [best] },
        extra: {
          chosen: chosen.design,
          faster: faster.design,
          ...Object.fromEntries(byDesign.map((entry) => [entry.design, Number(entry.rate.toFixed(1))])),
          direct: Number(measured.get(`direct:${streams}`)!.rate.toFixed(1)),
          ...Object.fromEntries([...DESIGNS, 'direct'].map((design) => [`${design}_runs`, measured.get(`${design}:${streams}`)!.rates.map((rate) => rate.toFixed(0)).join(' ')])),
          direct_first_stream_same_as_alone: directRuns.map((byStreams) => String(byStreams.get(streams)!.sameAsAlone)).join(' '),
        },
      });
    }
    // Memory at 4 slots against 1 (or the most slots measured, where 4 was not); none without a
    // run at 1 slot to compare with.
    const slots = STREAMS.includes(4) ? 4 : Math.max(...STREAMS);
    for (const design of STREAMS.includes(1) ? DESIGNS : []) {
      const one = measured.get(`${design}:1`)!;
      const many = measured.get(`${design}:${slots}`)!;
      figures.push({
        name: `PSS at ${slots} slots, ${design} (MiB)`,
        value: many.pss,
        baseline: one.pss,
        unit: 'MiB',
        ratio: many.pss / one.pss,
        target: 'reported',
        met: true,
        how: `sum of Pss (smaps_rollup) of the service and its runners after the ${slots}-stream run, against the same at 1 slot, ${model} (medians)`,
        samples: { value: [many.pss], baseline: [one.pss] },
      });
      if (Number.isNaN(many.gpu) || Number.isNaN(one.gpu)) continue;
      figures.push({
        name: `GPU memory at ${slots} slots, ${design} (MiB)`,
        value: many.gpu,
        baseline: one.gpu,
        unit: 'MiB',
        ratio: many.gpu / one.gpu,
        target: 'reported',
        met: true,
        how: `GPU memory in use (nvidia-smi) with the service loaded after the ${slots}-stream run, less the same before it started, against the same at 1 slot, ${model} (medians)`,
        samples: { value: [many.gpu], baseline: [one.gpu] },
      });
    }
    return figures;
  } finally {
    rmSync(modelsDir, { recursive: true, force: true });
  }
}
