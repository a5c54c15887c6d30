/** Runs the built `lmsp` binary as a user would. */
import { spawn, type ChildProcess } from 'node:child_process';
import { LMSP_BIN } from './service.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], options: { env?: Record<string, string>; input?: string; timeoutMs?: number; cwd?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [LMSP_BIN, ...args], {
      env: { ...process.env, ...options.env }, stdio: ['pipe', 'pipe', 'pipe'], ...(options.cwd ? { cwd: options.cwd } : {}),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`lmsp ${args.join(' ')} timed out\n${stdout}\n${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** A command started and left running, for a test that acts while it runs: what it wrote so far, and how it ends. */
export interface RunningCli {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  closed: Promise<number | null>;
}

export function startCli(args: string[], options: { env?: Record<string, string> } = {}): RunningCli {
  const child = spawn(process.execPath, [LMSP_BIN, ...args], { env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { child, stdout: () => stdout, stderr: () => stderr, closed };
}
