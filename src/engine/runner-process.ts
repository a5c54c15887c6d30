/**
 * One runner process (engine/runner.ts) as the pool sees it: spawned on first use, pinned to its
 * CPUs when the pool was given some, with the requests waiting on it routed by request id. An
 * exit reaches every request still waiting, which then fails instead of hanging, told whether
 * anybody asked for it (`kill()`) or not (a crash inside llama.cpp, the system killing it).
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ModelRef } from './engine.js';
import type { ParentMessage, RunnerMessage, RunnerSettings } from './protocol.js';

/** The runner's own module: what a runner process runs. */
export const RUNNER_SCRIPT = fileURLToPath(new URL('./runner.js', import.meta.url));

/** The JavaScript heap of a runner process, in MiB: the runner's own objects need a fraction of it. */
const RUNNER_HEAP_MB = 1024;

export type RunnerLog = (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;

/** The longest line of a runner's own output that is logged whole; the rest of it is cut. */
const OUTPUT_LINE_LIMIT = 4096;
/** Control characters (C0, DEL, C1) but the tab. */
const CONTROL_CHARACTERS = /[^\P{Cc}\t]/gu;

type Handler = (message: RunnerMessage) => void;

/** How a runner process ended, as the requests still waiting on it are told. */
export interface RunnerExit {
  /** What happened, for logs and task errors. */
  reason: string;
  /** Nobody asked for it (no `kill()`): a crash inside llama.cpp, or the system killed it. */
  unexpected: boolean;
  /** The signal that ended it, if one did. */
  signal: NodeJS.Signals | null;
}

/** One spawned runner: its process, and the requests waiting on it. */
interface RunnerChild {
  process: ChildProcess;
  handlers: Map<number, Handler>;
  exitListeners: Set<(exit: RunnerExit) => void>;
}

export class RunnerProcess {
  private child: RunnerChild | null = null;
  private nextRequestId = 1;
  model: ModelRef | null = null;
  /** Generations leased on this runner; at most `capacity` (its sequences, or one). */
  active = 0;
  /** The model its leases are for, loaded or being loaded. */
  assigned: ModelRef | null = null;
  /** Embedding requests running on this runner (beside a generation, or alone). */
  embeds = 0;
  /** When its last generation or embedding ended (performance.now(): monotonic, finer than a millisecond, for the LRU order). */
  lastUsedAt = 0;
  keepAliveTimer: NodeJS.Timeout | null = null;
  /** Its model is to be let go (its file no longer matches its digest): unloaded once idle, given no new work. */
  retiring = false;
  /** Its model makes room for another that a lease is about to load: given no new work meanwhile. */
  evicting = false;
  /** The runners (this one among them) whose model makes room for the one leased here, let go when it loads. */
  evicts: RunnerProcess[] | null = null;

  constructor(private readonly settings: RunnerSettings, private readonly log: RunnerLog | undefined,
    private readonly pin: { taskset: string; cpus: string } | null = null, readonly capacity = 1) {}

  /** A generation runs (or loads) on it. */
  get busy(): boolean {
    return this.active > 0;
  }

  get full(): boolean {
    return this.active >= this.capacity;
  }

  get alive(): boolean {
    return this.child !== null;
  }

  private spawn(): RunnerChild {
    if (this.child) return this.child;
    const options = {
      env: { ...process.env, LMSP_RUNNER_SETTINGS: JSON.stringify(this.settings) },
      // What the runner prints (llama.cpp's messages, which quote strings of the model file,
      // V8's when it dies) becomes log lines of the service, one per line printed, so that the
      // log stays one JSON object a line and a model file cannot write lines of its own into it.
      stdio: ['ignore', this.log ? 'pipe' : 'inherit', this.log ? 'pipe' : 'inherit', 'ipc'] as ('ignore' | 'inherit' | 'pipe' | 'ipc')[],
      serialization: 'json' as const,
    };
    // taskset sets the CPUs and execs node in its place: same process, same IPC channel. A model
    // file is untrusted (LMSP 5): its chat template runs in this process's JavaScript heap, which
    // is capped, so a template that allocates without end crashes the runner, not the machine
    // (the weights and caches of llama.cpp live outside that heap).
    const execArgv = [...process.execArgv, `--max-old-space-size=${RUNNER_HEAP_MB}`];
    const spawned = this.pin
      ? spawn(this.pin.taskset, ['-c', this.pin.cpus, process.execPath, ...execArgv, RUNNER_SCRIPT], options)
      : fork(RUNNER_SCRIPT, [], { ...options, execArgv });
    const child: RunnerChild = { process: spawned, handlers: new Map(), exitListeners: new Set() };
    this.logOutput(spawned);
    spawned.on('message', (message: RunnerMessage) => {
      if (message.type === 'ready') return;
      child.handlers.get(message.requestId)?.(message);
    });
    spawned.on('exit', (code, signal) => {
      // `kill()` lets go of its child first: one still held here ended without being asked to.
      const unexpected = this.child === child;
      const how = signal ? `signal ${signal}` : `exit code ${code}`;
      const reason = unexpected ? `the engine process exited unexpectedly (${how})` : `the engine process was stopped (${how})`;
      if (unexpected) {
        this.child = null;
        this.model = null;
        this.log?.('warn', reason);
      }
      for (const listener of [...child.exitListeners]) listener({ reason, unexpected, signal });
    });
    spawned.on('error', (error) => this.log?.('error', `runner process error: ${error.message}`));
    this.child = child;
    return child;
  }

  /** Logs each line a runner prints: standard output as info, standard error as warnings. */
  private logOutput(spawned: ChildProcess): void {
    const log = this.log;
    if (!log) return;
    for (const [stream, name, level] of [[spawned.stdout, 'stdout', 'info'], [spawned.stderr, 'stderr', 'warn']] as const) {
      if (!stream) continue;
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
        if (line.trim() === '') return;
        const cut = line.length > OUTPUT_LINE_LIMIT ? `${line.slice(0, OUTPUT_LINE_LIMIT)}... (${line.length} characters)` : line;
        // Control characters written out (\x1b...): a model file's strings must not move a terminal's cursor or colour its log.
        const text = cut.replace(CONTROL_CHARACTERS, (character) => `\\x${character.charCodeAt(0).toString(16).padStart(2, '0')}`);
        log(level, text, { runner_pid: spawned.pid, output: name });
      });
    }
  }

  /** Sends a request and routes its replies to `onMessage` until it returns true (done). */
  request(build: (requestId: number) => ParentMessage, onMessage: (message: RunnerMessage) => boolean,
    onExit: (exit: RunnerExit) => void): number {
    const child = this.spawn();
    const requestId = this.nextRequestId++;
    const exitListener = (exit: RunnerExit) => {
      child.handlers.delete(requestId);
      onExit(exit);
    };
    child.exitListeners.add(exitListener);
    child.handlers.set(requestId, (message) => {
      if (onMessage(message)) {
        child.handlers.delete(requestId);
        child.exitListeners.delete(exitListener);
      }
    });
    child.process.send(build(requestId));
    return requestId;
  }

  send(message: ParentMessage): void {
    this.child?.process.send(message);
  }

  /** Ends the process now, and resolves once it is gone (reaped, no longer among the service's children). */
  killAndWait(): Promise<void> {
    const child = this.child;
    this.kill();
    if (!child || child.process.exitCode !== null || child.process.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => child.process.once('exit', () => resolve()));
  }

  /** Ends the process now; the next request starts a fresh one. */
  kill(): void {
    const child = this.child;
    if (!child) return;
    this.child = null;
    this.model = null;
    child.process.kill('SIGKILL');
  }
}
