/**
 * Starting, SIGKILLing and reaping the real service (and its runner processes), and the small
 * waits the rest of the harness shares.
 */
import { readFileSync } from 'node:fs';
import { childPids, startService, type StartOptions, type TestService } from '../../test/helpers/service.js';
import type { Info } from './report.js';

/**
 * startService, tried up to three times: on a shared machine something else may stop a service
 * while it starts, and a crash loop must not give up on the first bad start.
 */
export async function startWithRetry(options: StartOptions, previous?: TestService, info?: Info): Promise<TestService> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const started = previous
        ? await previous.restart({ args: options.args ?? [], env: options.env ?? {}, timeoutMs: options.timeoutMs ?? 30_000 })
        : await startService({ timeoutMs: 30_000, ...options });
      return started;
    } catch (error) {
      lastError = error;
      info?.bump('start_retries');
    }
  }
  throw lastError;
}

function processGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/**
 * SIGKILLs the service. Returns a function that waits (bounded) for its runner processes, which
 * end by themselves when their parent's IPC channel closes; one still there after 5 s is counted
 * and killed by its pid (it is ours: started by the service we started).
 */
export async function killService(service: TestService, info: Info): Promise<() => Promise<void>> {
  const runners = childPids(service.pid);
  if (service.child.exitCode !== null || service.child.signalCode !== null) info.bump('service_died_before_kill');
  await service.kill();
  return async () => {
    const deadline = Date.now() + 5000;
    while (runners.some((pid) => !processGone(pid)) && Date.now() < deadline) await sleep(20);
    for (const pid of runners.filter((pid) => !processGone(pid))) {
      info.bump('lingering_runner_processes');
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // it ended meanwhile
      }
    }
  };
}

/** SIGKILL, then wait for the runners. */
export async function killAndReap(service: TestService, info: Info): Promise<void> {
  await (await killService(service, info))();
}

/** Whether all `promises` settled within `ms` (the timer is cleared, so nothing is left pending). */
export async function settledWithin(promises: Array<Promise<unknown>>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((done) => {
    timer = setTimeout(() => done(false), ms);
  });
  try {
    return await Promise.race([Promise.allSettled(promises).then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((done) => {
    const onAbort = () => {
      clearTimeout(timer);
      done();
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      done();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
