/** What every command shares: the data directory, `--json` output, errors and exit codes. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { LmspClient, LmspApiError } from '../api/client.js';
import { ServiceError } from '../api/errors.js';
import { readOperatorToken } from '../auth/clients.js';
import { ConfigError, resolveDataDir } from '../config.js';
import { DatabaseOpenError, Store } from '../store/index.js';
import { SERVICE_FILE, type ServiceInfo } from '../service.js';

export const EXIT_USAGE = 2;
export const EXIT_NOT_RUNNING = 3;

export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

export interface CommonOptions {
  dataDir?: string;
  json?: boolean;
}

/** Adds the options every command takes (LMSP section 12). */
export function withCommonOptions(command: Command): Command {
  return command
    .option('--data-dir <path>', 'data directory (default: $LMSP_DATA_DIR, $XDG_DATA_HOME/lmsp or ~/.local/share/lmsp)')
    .option('--json', 'print one JSON document on stdout');
}

export function dataDirOf(options: CommonOptions): string {
  return resolveDataDir(options.dataDir);
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Opens the data directory's database directly (commands that work with the service stopped). */
export function openStore(options: CommonOptions, create = false): Store {
  return Store.open(dataDirOf(options), { create, check: false });
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The running service of this data directory, if any. */
export function runningService(options: CommonOptions): ServiceInfo | null {
  const path = join(dataDirOf(options), SERVICE_FILE);
  if (!existsSync(path)) return null;
  try {
    const info = JSON.parse(readFileSync(path, 'utf8')) as ServiceInfo;
    return processAlive(info.pid) ? info : null;
  } catch {
    return null;
  }
}

/** A client of the running service, authenticated with the operator token the service keeps. */
export function operatorClient(options: CommonOptions): LmspClient {
  const info = runningService(options);
  if (!info) throw new CliError(`the lmsp service is not running for ${dataDirOf(options)}; start it with \`lmsp serve\``, EXIT_NOT_RUNNING);
  const token = readOperatorToken(dataDirOf(options));
  if (!token) throw new CliError(`no operator token in ${dataDirOf(options)}; restart the service to create one`, EXIT_NOT_RUNNING);
  return new LmspClient({ baseUrl: info.url, token });
}

/** Runs a command's action, turning known failures into a message and an exit code. */
export function action<A extends unknown[]>(run: (...args: A) => Promise<void> | void): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await run(...args);
    } catch (error) {
      if (error instanceof CliError) fail(error.message, error.exitCode);
      if (error instanceof DatabaseOpenError) fail(error.message, error.exitCode);
      if (error instanceof ConfigError) fail(error.message, EXIT_USAGE);
      if (error instanceof LmspApiError) fail(`${error.message} (${error.status} ${error.code})`, 1);
      if (error instanceof ServiceError) fail(`${error.message} (${error.code})`, 1);
      if ((error as NodeJS.ErrnoException).code === 'ECONNREFUSED') fail('cannot reach the lmsp service: is it running?', EXIT_NOT_RUNNING);
      throw error;
    }
  };
}

export function fail(message: string, exitCode: number): never {
  process.stderr.write(`lmsp: ${message}\n`);
  process.exit(exitCode);
}

/** Formats rows as an aligned table for people (`--json` is for scripts). */
export function table(rows: Array<Record<string, unknown>>, columns: string[]): string {
  const cells = rows.map((row) => columns.map((column) => (row[column] === null || row[column] === undefined ? '-' : String(row[column]))));
  const widths = columns.map((column, index) => Math.max(column.length, ...cells.map((line) => line[index]!.length)));
  const line = (values: string[]) => values.map((value, index) => value.padEnd(widths[index]!)).join('  ').trimEnd();
  return [line(columns.map((column) => column.toUpperCase())), ...cells.map(line)].join('\n');
}

export function formatTime(seconds: number | null | undefined): string {
  if (!seconds) return '-';
  return new Date(seconds * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}
