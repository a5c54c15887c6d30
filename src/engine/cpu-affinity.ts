/**
 * Pins each runner process to CPUs of its own (Linux, `taskset`), so that llama.cpp's decode
 * threads are not moved between cores and do not share theirs with the service's own work
 * (HTTP, SQLite commits, SSE). On a 2-core machine with one decode thread this is worth about
 * a fifth more tokens per second while streaming (see BENCHMARKS.md). Only done when every
 * runner can have `threads` CPUs and the service still keeps one; otherwise nothing is pinned.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';

export type CpuAffinityMode = 'auto' | 'off';

/** Parses a kernel CPU list such as "0-3,8,10-11" into CPU numbers, in order. */
export function parseCpuList(text: string): number[] {
  const cpus: number[] = [];
  for (const part of text.trim().split(',')) {
    if (part === '') continue;
    const match = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!match) throw new Error(`not a CPU list: ${text}`);
    const first = Number(match[1]);
    const last = match[2] === undefined ? first : Number(match[2]);
    for (let cpu = first; cpu <= last; cpu++) cpus.push(cpu);
  }
  return cpus;
}

/** The CPUs this process may run on (Linux), or null where that cannot be read. */
export function allowedCpus(): number[] | null {
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    const line = /^Cpus_allowed_list:\s*(.+)$/m.exec(status);
    return line ? parseCpuList(line[1]!) : null;
  } catch {
    return null;
  }
}

/** The path of an executable found on PATH, or null. */
export function findExecutable(name: string, path = process.env.PATH ?? ''): string | null {
  for (const folder of path.split(delimiter)) {
    if (!folder) continue;
    const candidate = join(folder, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

export type AffinityPlan =
  | { pinned: true; taskset: string; runnerCpus: string[]; serviceCpus: number[] }
  | { pinned: false; reason: string };

/**
 * Runner `i` gets `threads` CPUs counted from the end of the allowed list, so that the service
 * keeps the first ones (where the system's own work tends to run).
 */
export function planAffinity(mode: CpuAffinityMode, slots: number, threads: number, cpus: number[] | null, taskset: string | null): AffinityPlan {
  if (mode === 'off') return { pinned: false, reason: 'cpu_affinity is off' };
  if (!cpus || cpus.length === 0) return { pinned: false, reason: 'the allowed CPUs cannot be read on this system' };
  if (!taskset) return { pinned: false, reason: 'taskset (util-linux) is not installed' };
  const needed = slots * threads;
  if (cpus.length < needed + 1) {
    return { pinned: false, reason: `${cpus.length} CPU(s) are not enough for ${slots} runner(s) of ${threads} thread(s) and the service` };
  }
  const runnerCpus = Array.from({ length: slots }, (_, slot) => cpus.slice(cpus.length - (slot + 1) * threads, cpus.length - slot * threads).join(','));
  return { pinned: true, taskset, runnerCpus, serviceCpus: cpus.slice(0, cpus.length - needed) };
}

/** The plan for this machine: its allowed CPUs, its taskset, and a probe that taskset works here. */
export async function affinityForThisMachine(mode: CpuAffinityMode, slots: number, threads: number): Promise<AffinityPlan> {
  const plan = planAffinity(mode, slots, threads, allowedCpus(), findExecutable('taskset'));
  if (plan.pinned && !(await tasksetWorks(plan.taskset, plan.runnerCpus[0]!))) return { pinned: false, reason: 'taskset cannot set CPU affinity here' };
  return plan;
}

/**
 * Whether `taskset` can actually set these CPUs here: some containers forbid changing affinity,
 * and a runner that cannot start would fail every task. Asked without blocking: on a loaded
 * machine the probe has taken seconds, during which the service must still hear a stop.
 */
export function tasksetWorks(taskset: string, cpus: string): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(taskset, ['-c', cpus, process.execPath, '--version'], { timeout: 10_000 }, (error) => resolve(error === null));
  });
}
