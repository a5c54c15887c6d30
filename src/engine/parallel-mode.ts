/**
 * How the `--parallel` slots of a model run (`--parallel-mode`), and the rule `auto` follows.
 *
 * - `processes`: a runner process per slot, each with the model loaded. On the CPU the processes
 *   share the mmap'd weights through the page cache, and a task's output never depends on what
 *   decodes beside it, so a resume is identical to an uninterrupted run always (LMSP 7.5).
 * - `sequences`: one runner process per model whose context has a sequence per slot, decoded
 *   together in one batch. On a GPU every runner process would upload its own copy of the weights
 *   to VRAM and nothing would be batched; one process with sequences is what llama.cpp's server
 *   and vLLM do there.
 *
 * `auto` (the default) takes sequences on a GPU backend and processes on the CPU, where the
 * benchmarks measured the loss of bit-exact outputs under load as the larger cost (BENCHMARKS.md).
 */
import type { ServiceConfig } from '../config.js';
import type { RunnerSettings } from './protocol.js';
import { RunnerProcess } from './runner-process.js';

export type ParallelMode = Exclude<ServiceConfig['parallelMode'], 'auto'>;

export interface ParallelModeChoice {
  mode: ParallelMode;
  /** Why, in words, for the startup log. */
  reason: string;
}

/** How long llama.cpp may take to say which backend it uses before `auto` settles for processes. */
const PROBE_TIMEOUT_MS = 60_000;

/**
 * The mode the slots run in. `probe` asks llama.cpp which backend `--gpu auto` gets; it is called
 * only when the answer decides something (`auto`, more than one slot, `--gpu auto`).
 */
export async function chooseParallelMode(
  setting: ServiceConfig['parallelMode'], parallel: number, gpu: RunnerSettings['gpu'], probe: () => Promise<string | false>,
): Promise<ParallelModeChoice> {
  if (setting !== 'auto') return { mode: setting, reason: '--parallel-mode' };
  if (parallel === 1) return { mode: 'processes', reason: 'one slot' };
  if (gpu === 'cpu') return { mode: 'processes', reason: 'CPU backend (--gpu cpu)' };
  if (gpu !== 'auto') return { mode: 'sequences', reason: `GPU backend (--gpu ${gpu})` };
  let backend: string | false;
  try {
    backend = await probe();
  } catch (error) {
    return { mode: 'processes', reason: `llama.cpp did not say which backend it uses (${(error as Error).message})` };
  }
  return backend === false
    ? { mode: 'processes', reason: 'llama.cpp found no GPU: CPU backend' }
    : { mode: 'sequences', reason: `GPU backend (${backend})` };
}

/** Starts a runner process with these settings, asks it which backend llama.cpp loaded, and ends it. */
export function probeBackend(settings: RunnerSettings, timeoutMs = PROBE_TIMEOUT_MS): Promise<string | false> {
  const runner = new RunnerProcess(settings, undefined);
  let timer: NodeJS.Timeout | undefined;
  return new Promise<string | false>((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs / 1000} s`)), timeoutMs);
    runner.request((requestId) => ({ type: 'backend', requestId }), (message) => {
      if (message.type === 'backend') resolve(message.gpu);
      else if (message.type === 'error') reject(new Error(message.message));
      else return false;
      return true;
    }, (exit) => reject(new Error(exit.reason)));
  }).finally(() => {
    clearTimeout(timer);
    return runner.killAndWait();
  });
}
