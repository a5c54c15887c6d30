/**
 * Durable creates: background creates answered 202 per second by lmsp (synchronous = FULL, each
 * answered only after the commit that holds its task), against a bare Fastify route that parses
 * the same JSON and answers without storing, and against their floor: a bare route that writes
 * the same rows through lmsp's store and does nothing else (floor-server.ts). All are loaded the
 * same way by autocannon with many concurrent connections over HTTP, one after the other,
 * several times.
 *
 * Two situations: the runner idle (the model load never finishes, so the tasks stay queued) and
 * the runner busy (each create asks for 1 token and the runner executes them while the load
 * runs, writing their output on the request thread's connection). In each, creates written by
 * the writer thread and creates written on the request thread (LMSP_DEBUG_WRITER_THREAD=1 or not)
 * alternate, and the request thread's event-loop delay during the load is read from /metrics.
 */
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { firstJsonLine, log, median, runs, spawnScript, startService, stopChild, type Figure, type TestService } from './lib.js';

const CONNECTIONS = 32;
const DURATION_S = 5;
const body = (maxOutputTokens: number) =>
  JSON.stringify({ model: 'lmsp-tiny', input: 'Write a haiku about durable storage.', background: true, max_output_tokens: maxOutputTokens });

const SITUATIONS = {
  idle: { env: { LMSP_DEBUG_LOAD_DELAY_MS: '3600000' }, body: body(16) },
  busy: { env: {}, body: body(1) },
} as const;
const VARIANTS = {
  writer: { LMSP_DEBUG_WRITER_THREAD: '1' },
  'request thread': {},
} as const;
type Situation = keyof typeof SITUATIONS;
type Variant = keyof typeof VARIANTS;

async function load(url: string, token: string | null, payload: string): Promise<{ rate: number; non2xx: number; accepted: number }> {
  const result = await autocannon({
    url: `${url}/v1/responses`,
    method: 'POST',
    connections: CONNECTIONS,
    duration: DURATION_S,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: payload,
  });
  return { rate: result.requests.average, non2xx: result.non2xx + result.errors, accepted: result['2xx'] };
}

/**
 * CPU seconds used so far by a process's main thread (the request thread) and by the whole
 * process (its threads, not its runner processes), from /proc: on a shared machine the CPU a
 * create costs is steadier than how many fit in a second.
 */
function cpuSeconds(pid: number): { requestThread: number; process: number } {
  const ticks = (path: string) => {
    const stat = readFileSync(path, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, USER_HZ = 100
  };
  return { requestThread: ticks(`/proc/${pid}/task/${pid}/stat`), process: ticks(`/proc/${pid}/stat`) };
}

/** The request thread's event-loop delay since the last scrape (prom-client resets it at each one), in ms. */
async function loopDelay(service: TestService): Promise<{ p99: number; max: number }> {
  const text = await (await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${service.token}` } })).text();
  const value = (name: string) => Number(new RegExp(`^${name} ([0-9.e+-]+)`, 'm').exec(text)?.[1] ?? NaN) * 1000;
  return { p99: value('nodejs_eventloop_lag_p99_seconds'), max: value('nodejs_eventloop_lag_max_seconds') };
}

interface Measured {
  rate: number;
  p99: number;
  max: number;
  /** CPU milliseconds per create: the request thread's, and the whole process's. */
  requestThreadMs: number;
  processMs: number;
}

async function measure(situation: Situation, variant: Variant): Promise<Measured> {
  const { env, body: payload } = SITUATIONS[situation];
  // The cap on unfinished tasks (LMSP 16) would refuse most of the load: lifted here.
  const service = await startService({
    env: { ...env, ...VARIANTS[variant], LMSP_LOG_LEVEL: 'warn', LMSP_MAX_UNFINISHED_TASKS_PER_CLIENT: '100000000' },
  });
  try {
    await load(service.url, service.token, payload); // warm-up
    await loopDelay(service);
    const before = cpuSeconds(service.pid);
    const result = await load(service.url, service.token, payload);
    const after = cpuSeconds(service.pid);
    const delay = await loopDelay(service);
    if (result.non2xx > 0) throw new Error(`${result.non2xx} creates were not answered 202 (${situation}, ${variant})`);
    const perCreate = (seconds: number) => (seconds * 1000) / Math.max(1, result.accepted);
    return {
      rate: result.rate, ...delay,
      requestThreadMs: perCreate(after.requestThread - before.requestThread), processMs: perCreate(after.process - before.process),
    };
  } finally {
    await service.kill();
  }
}

/** The rate of a baseline server (bench/<name>.ts): warmed up, then loaded as lmsp is. */
async function loadScript(name: string, args: string[] = []): Promise<number> {
  const server = spawnScript(name, args);
  try {
    const { url } = await firstJsonLine<{ url: string }>(server);
    await load(url, null, SITUATIONS.idle.body); // warm-up
    const result = await load(url, null, SITUATIONS.idle.body);
    if (result.non2xx > 0) throw new Error(`${result.non2xx} answers of ${name} were not 202`);
    return result.rate;
  } finally {
    await stopChild(server);
  }
}

export async function benchCreates(): Promise<Figure[]> {
  const bare: number[] = [];
  const floor: number[] = [];
  const floorWithoutAutoVacuum: number[] = [];
  const rates: Record<string, number[]> = {};
  const delays: Record<string, number[]> = {};
  const cpu: Record<string, number[]> = {};
  for (let run = 0; run < runs(); run++) {
    const bareRate = await loadScript('bare-server');
    // Incremental auto_vacuum (as lmsp's databases) and none, in alternating order.
    const floors = run % 2 ? [[], ['--auto-vacuum-none']] : [['--auto-vacuum-none'], []];
    let floorRate = 0;
    let noneRate = 0;
    for (const args of floors) {
      const rate = await loadScript('floor-server', args);
      if (args.length) noneRate = rate;
      else floorRate = rate;
    }
    bare.push(bareRate);
    floor.push(floorRate);
    floorWithoutAutoVacuum.push(noneRate);
    const line = [`bare ${bareRate.toFixed(0)}/s`, `floor ${floorRate.toFixed(0)}/s`, `floor without auto_vacuum ${noneRate.toFixed(0)}/s`];
    for (const situation of Object.keys(SITUATIONS) as Situation[]) {
      const variants = Object.keys(VARIANTS) as Variant[];
      // Alternate which variant goes first from run to run.
      for (const variant of run % 2 ? variants.reverse() : variants) {
        const result = await measure(situation, variant);
        (rates[`${situation}, ${variant}`] ??= []).push(result.rate);
        (delays[`${situation}, ${variant}`] ??= []).push(result.p99, result.max);
        (cpu[`${situation}, ${variant}`] ??= []).push(result.requestThreadMs, result.processMs);
        line.push(`${situation}/${variant} ${result.rate.toFixed(0)}/s (loop delay p99 ${result.p99.toFixed(1)} ms, max ${result.max.toFixed(1)} ms; `
          + `CPU per create ${(result.requestThreadMs * 1000).toFixed(0)} us request thread, ${(result.processMs * 1000).toFixed(0)} us process)`);
      }
    }
    log(`creates run ${run + 1}: ${line.join(', ')}`);
  }
  const baseline = median(bare);
  const extra: Record<string, string> = {};
  for (const [name, values] of Object.entries(rates)) extra[`${name} (202/s)`] = values.map((value) => value.toFixed(0)).join(' ');
  for (const [name, values] of Object.entries(delays)) {
    extra[`${name}, loop delay p99/max ms`] = values.map((value) => value.toFixed(1)).join(' ');
  }
  for (const [name, values] of Object.entries(cpu)) {
    extra[`${name}, CPU us per create request thread/process`] = values.map((value) => (value * 1000).toFixed(0)).join(' ');
  }
  const figure = (name: string, key: string): Figure => {
    const value = median(rates[key]!);
    return {
      name,
      value,
      baseline,
      unit: 'req/s',
      ratio: value / baseline,
      target: '>= 0.5',
      met: value / baseline >= 0.5,
      how: `autocannon, ${CONNECTIONS} connections, ${DURATION_S} s after a ${DURATION_S} s warm-up; lmsp with synchronous = FULL (creates written on the request thread, the default) vs a bare Fastify route; alternated with creates written by the writer thread (LMSP_DEBUG_WRITER_THREAD=1)`,
      samples: { value: rates[key]!, baseline: bare },
      extra,
    };
  };
  const floorValue = median(floor);
  const idle = median(rates['idle, request thread']!);
  return [
    figure('Durable creates (202/s)', 'idle, request thread'),
    figure('Durable creates, runner busy with 1-token tasks (202/s)', 'busy, request thread'),
    {
      name: 'Durable creates: their floor (the same rows through the same store, nothing else) against the bare route (202/s)',
      value: floorValue, baseline, unit: 'req/s', ratio: floorValue / baseline, target: 'reported', met: true,
      how: 'bench/floor-server.ts: a bare Fastify route that writes each create\'s response, task and first event through lmsp\'s store (group commit, synchronous = FULL) and answers 202 after the commit, without authentication, validation, idempotency, model checks or metrics; loaded as the others',
      samples: { value: floor, baseline: bare },
    },
    {
      name: 'Durable creates against their floor (202/s)',
      value: idle, baseline: floorValue, unit: 'req/s', ratio: idle / floorValue, target: 'reported', met: true,
      how: 'lmsp\'s idle-runner figure above against the floor of the line above, same runs',
      samples: { value: rates['idle, request thread']!, baseline: floor },
    },
    {
      name: 'Durable creates\' floor with incremental auto_vacuum (as lmsp\'s databases) against the same without it (202/s)',
      value: floorValue, baseline: median(floorWithoutAutoVacuum), unit: 'req/s', ratio: floorValue / median(floorWithoutAutoVacuum),
      target: 'reported', met: true,
      how: 'bench/floor-server.ts as above, and the same with its database rewritten with auto_vacuum = NONE (--auto-vacuum-none), alternated within each run',
      samples: { value: floor, baseline: floorWithoutAutoVacuum },
    },
  ];
}
