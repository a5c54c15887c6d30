/**
 * Starts the real service (the built `lmsp` binary) on a free loopback port with its own data
 * directory, and kills it for real (SIGKILL) when a test wants a crash.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LmspClient } from '../../src/api/client.js';
import { makeDataDir } from './data-dir.js';

export const LMSP_BIN = fileURLToPath(new URL('../../../bin/lmsp.js', import.meta.url));

export interface StartOptions {
  dataDir?: string;
  args?: string[];
  env?: Record<string, string>;
  /** How long to wait for the service to be healthy. */
  timeoutMs?: number;
  /**
   * Starts it in a process group of its own, with its runners, as a shell starts a command: a
   * test can then signal the whole group (`process.kill(-pid, ...)`) as Ctrl-C does.
   */
  ownProcessGroup?: boolean;
}

export interface TestService {
  url: string;
  token: string;
  dataDir: string;
  pid: number;
  client: LmspClient;
  child: ChildProcess;
  output(): string;
  /** SIGKILL, and wait for the process (and its runners) to be gone. */
  kill(): Promise<void>;
  /** SIGTERM, a graceful stop. */
  stop(): Promise<void>;
  /** Starts the service again on the same data directory (and the same options unless given). */
  restart(options?: Omit<StartOptions, 'dataDir'>): Promise<TestService>;
}

export async function waitFor<T>(check: () => T | Promise<T>, options: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 45_000);
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what ?? 'a condition'}${last ? `: ${String(last)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 20));
  }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function startService(options: StartOptions = {}): Promise<TestService> {
  const dataDir = options.dataDir ?? makeDataDir('service');
  const args = [LMSP_BIN, 'serve', '--data-dir', dataDir, '--port', '0', ...(options.args ?? [])];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, LMSP_LOG_LEVEL: 'warn', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.ownProcessGroup ?? false,
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const serviceFile = join(dataDir, 'service.json');
  const info = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`lmsp serve exited with ${child.exitCode}:\n${output}`);
    if (!existsSync(serviceFile)) return null;
    const parsed = JSON.parse(readFileSync(serviceFile, 'utf8')) as { url: string; pid: number };
    return parsed.pid === child.pid ? parsed : null;
  }, { timeoutMs: options.timeoutMs ?? 30_000, what: `the service to start (output so far:\n${output})` }).catch((error: Error) => {
    child.kill('SIGKILL');
    throw new Error(`${error.message}\n${output}`);
  });
  const token = readFileSync(join(dataDir, 'operator.token'), 'utf8').trim();
  const service: TestService = {
    url: info.url,
    token,
    dataDir,
    pid: child.pid!,
    child,
    client: new LmspClient({ baseUrl: info.url, token }),
    output: () => output,
    async kill() {
      child.kill('SIGKILL');
      await exited(child);
    },
    async stop() {
      child.kill('SIGTERM');
      await exited(child);
    },
    restart: (next = {}) => startService({ args: options.args, env: options.env, timeoutMs: options.timeoutMs, ...next, dataDir }),
  };
  return service;
}

/** Pairs a new client with these scopes through the API; returns its token and a client for it. */
export async function pairClient(service: TestService, scopes: string[], name = 'test-client'): Promise<{ id: string; token: string; client: LmspClient }> {
  const code = await service.client.createPairingCode({ name, scopes });
  const paired = await new LmspClient({ baseUrl: service.url }).pair(code.code, name);
  return { id: paired.id, token: paired.token, client: new LmspClient({ baseUrl: service.url, token: paired.token }) };
}

/** A fetch with the service's operator token. */
export function api(service: Pick<TestService, 'url' | 'token'>, path: string, init: RequestInit & { json?: unknown } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  if (!headers.has('authorization')) headers.set('authorization', `Bearer ${service.token}`);
  let body = init.body;
  if (init.json !== undefined) {
    headers.set('content-type', 'application/json');
    body = JSON.stringify(init.json);
  }
  return fetch(service.url + path, { ...init, headers, body: body ?? null });
}

/** The `error` object of an LMSP error answer (LMSP 9). */
export async function errorOf(response: Response): Promise<{ code: string; message: string; param: string | null }> {
  return ((await response.json()) as { error: { code: string; message: string; param: string | null } }).error;
}

/** Runs `test` against a fresh service; kills it afterwards and keeps the data directory on failure. */
export async function withService<T>(options: StartOptions, test: (service: TestService) => Promise<T>): Promise<T> {
  const dataDir = options.dataDir ?? makeDataDir('service');
  const services: TestService[] = [];
  // Every service started for this test, restarts included, is tracked so none outlives it.
  const track = (service: TestService): TestService => {
    services.push(service);
    const restart = service.restart;
    service.restart = async (again) => track(await restart(again));
    return service;
  };
  const start = async (next: StartOptions) => track(await startService({ ...next, dataDir }));
  try {
    const result = await test(await start(options));
    await Promise.all(services.map((service) => service.kill()));
    const { rmSync } = await import('node:fs');
    rmSync(dataDir, { recursive: true, force: true });
    return result;
  } catch (error) {
    await Promise.all(services.map((service) => service.kill()));
    console.error(`# data directory kept for inspection: ${dataDir}`);
    for (const service of services) console.error(`# service output:\n${service.output()}`);
    throw error;
  }
}

/** Processes whose parent is `pid` (Linux /proc), e.g. a service's runner processes. */
/** Whether a process with this pid still exists (signal 0 checks without signalling). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function childPids(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === pid) children.push(Number(entry));
    } catch {
      // the process ended meanwhile
    }
  }
  return children;
}
