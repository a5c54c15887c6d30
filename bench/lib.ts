/**
 * What the benchmarks share: starting the real service, a second process as baseline, medians,
 * and a description of the machine. Every figure is a ratio of two things measured side by side
 * in the same run, because absolute numbers drift on a shared machine.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpus, totalmem, platform, release } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { AffinityPlan } from '../src/engine/cpu-affinity.js';
import { startService, type StartOptions, type TestService } from '../test/helpers/service.js';
import { readSse } from '../test/helpers/sse.js';

export { startService, type TestService };
export type { StartOptions };

export interface Figure {
  name: string;
  /** What lmsp achieved, and what it is compared with, in the same unit. */
  value: number;
  baseline: number;
  unit: string;
  /** value / baseline, or the measured value itself when there is no baseline (baseline 0). */
  ratio: number;
  target: string;
  met: boolean;
  how: string;
  samples: { value: number[]; baseline: number[] };
  extra?: Record<string, number | string>;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export function runs(): number {
  return Math.max(1, Number(process.env.BENCH_RUNS ?? 3));
}

/**
 * Writes every dirty page of the system out (`sync`), so that what one measurement wrote (a
 * 250 MB database, a million deleted events) is not written back during the next one.
 */
export function settleDisk(): void {
  if (platform() === 'win32') return;
  spawnSync('sync', { stdio: 'ignore' });
}

export function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

export function machine(): Record<string, string> {
  const cpu = cpus();
  return {
    cpu: `${cpu[0]?.model ?? 'unknown'} (${cpu.length} cores)`,
    memory: `${Math.round(totalmem() / 1024 ** 3)} GiB`,
    os: `${platform()} ${release()}`,
    node: process.version,
  };
}

/** Runs a compiled bench script (dist/bench/<name>.js) as a child process. */
export function spawnScript(name: string, args: string[] = [], env: Record<string, string> = {}): ChildProcess {
  const script = fileURLToPath(new URL(`./${name}.js`, import.meta.url));
  return spawn(process.execPath, [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
}

/**
 * Runs a compiled bench script to its end, on the CPUs of `affinity` when it pins (as the
 * service pins its runner), and answers every line it printed, each parsed as JSON.
 */
export function jsonLinesOfScript<T>(name: string, args: string[], affinity: AffinityPlan): Promise<T[]> {
  const script = fileURLToPath(new URL(`./${name}.js`, import.meta.url));
  const child = affinity.pinned
    ? spawn(affinity.taskset, ['-c', affinity.runnerCpus[0]!, process.execPath, script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
    : spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) => child.on('exit', (code) => {
    if (code !== 0) return reject(new Error(`${name} exited with ${code}`));
    resolve(output.trim().split('\n').map((line) => JSON.parse(line) as T));
  }));
}

/** The first line a child prints on stdout, parsed as JSON. */
export function firstJsonLine<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      const newline = buffer.indexOf('\n');
      if (newline >= 0) resolve(JSON.parse(buffer.slice(0, newline)) as T);
    });
    child.on('exit', (code) => reject(new Error(`bench script exited with ${code} before answering`)));
  });
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

/** Resident memory of a process and its children, in MiB (Linux /proc). */
export async function residentMiB(pid: number): Promise<number> {
  const { readFileSync, readdirSync } = await import('node:fs');
  const rss = (id: number) => {
    const status = readFileSync(`/proc/${id}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  };
  let total = rss(pid);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) total += rss(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/**
 * Reads a streamed Responses answer to its end: when its first and last text deltas arrived
 * (performance.now()) and the output tokens its final event reports.
 */
export async function timeResponseStream(response: Response): Promise<{ first: number; last: number; tokens: number }> {
  let first = 0;
  let last = 0;
  let tokens = 0;
  for await (const frame of readSse(response)) {
    if (frame.event === 'response.output_text.delta') {
      last = performance.now();
      if (!first) first = last;
    } else if (frame.event === 'response.incomplete' || frame.event === 'response.completed') {
      tokens = (JSON.parse(frame.data) as { response: { usage: { output_tokens: number } } }).response.usage.output_tokens;
    }
  }
  return { first, last, tokens };
}
