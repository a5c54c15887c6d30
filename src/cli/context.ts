/** What every command shares: the data directory, `--json` output, errors and exit codes. */
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { LmspClient, LmspApiError } from '../api/client.js';
import type { ServiceObject } from '../api/types.js';
import { readOperatorToken } from '../auth/clients.js';
import { loadPairingKey } from '../auth/pairing-key.js';
import { ConfigError, resolveConfig, resolveDataDir, STORED_CONFIG_PREFIX, type OptionDefinition, type ServiceConfig } from '../config.js';
import { isStorageUnavailable, ServiceError } from '../domain/errors.js';
import { ModelRegistry } from '../models/registry.js';
import { SERVICE_FILE, type ServiceInfo } from '../service.js';
import { assertPrivateDataDir, DatabaseOpenError, EXIT_DATABASE_TOO_NEW, EXIT_DATABASE_UNAVAILABLE, sqliteErrorOf, Store } from '../store/index.js';
import { isDataDirLocked, lockDataDir, type DataDirLock } from '../store/lock.js';
import { readServiceId } from '../store/service-config.js';
import { newTaskMachine } from '../tasks/core.js';
import type { TaskMachine } from '../tasks/task-machine.js';

export const EXIT_USAGE = 2;
export const EXIT_NOT_RUNNING = 3;
/** A command stopped by Ctrl-C, as a shell reports one stopped by SIGINT. */
export const EXIT_INTERRUPTED = 130;

/** The `code` of a failure of the command itself, as `--json` prints it, by exit code. */
const CLI_ERROR_CODES: Readonly<Record<number, string>> = { [EXIT_USAGE]: 'invalid_usage', [EXIT_NOT_RUNNING]: 'service_not_running' };

export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1, readonly code = CLI_ERROR_CODES[exitCode] ?? 'command_failed') {
    super(message);
  }
}

/** A number option, or a usage error (exit 2) naming it: never a value silently dropped. */
export function numberOption(name: string, value: string, { integer = false, min = -Infinity } = {}): number {
  const parsed = value.trim() === '' ? NaN : Number(value);
  if (!Number.isFinite(parsed) || (integer && !Number.isInteger(parsed))) {
    throw new CliError(`${name}: expected ${integer ? 'an integer' : 'a number'}, got '${value}'`, EXIT_USAGE);
  }
  if (parsed < min) throw new CliError(`${name}: expected at least ${min}, got '${value}'`, EXIT_USAGE);
  return parsed;
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

/** Whether this process has begun its `--json` document: a failure after that adds no second one. */
let jsonDocumentBegun = false;

/** Marks the `--json` document as begun, for a command that writes it piece by piece. */
export function beginJsonDocument(): void {
  jsonDocumentBegun = true;
}

let closedStdoutEndsCommand = true;

/**
 * Whether a reader that closes standard output early ends the command, as it quietly ends other
 * command-line tools (`lmsp tasks events ID | head`). `lmsp serve` turns it off: its standard
 * output holds at most one document, and a service does not stop because its reader left.
 */
export function stdoutClosedEndsCommand(): boolean {
  return closedStdoutEndsCommand;
}

export function keepRunningWhenStdoutCloses(): void {
  closedStdoutEndsCommand = false;
}

/** A file's size, 0 when it cannot be read (whoever reports on it says why). */
export function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

export function printJson(value: unknown): void {
  beginJsonDocument();
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Opens the data directory's database directly (commands that work with the service stopped). */
export function openStore(options: CommonOptions, create = false): Store {
  return Store.open(dataDirOf(options), { create });
}

export type StoredSettings = Partial<Record<OptionDefinition['key'], string>>;

/** The settings stored in the data directory (`lmsp config set`). */
export function storedSettings(store: Store): StoredSettings {
  return store.config.withPrefix(STORED_CONFIG_PREFIX) as StoredSettings;
}

/** The effective settings: flags > LMSP_* > stored > defaults (LMSP section 2). */
export function loadConfig(options: CommonOptions, store: Store, flags: StoredSettings = {}): ServiceConfig {
  return resolveConfig({ flags, dataDirFlag: options.dataDir, stored: storedSettings(store) });
}

/** The task core of a data directory whose service is not running: the same use cases, no engine. */
export interface OfflineCore {
  store: Store;
  registry: ModelRegistry;
  machine: TaskMachine;
  config: ServiceConfig;
  pairingKey: Buffer;
  close(): Promise<void>;
}

export function openOffline(options: CommonOptions, create = false): OfflineCore {
  const store = openStore(options, create);
  const config = loadConfig(options, store);
  return {
    store,
    config,
    registry: new ModelRegistry(store, config.modelsDir),
    machine: newTaskMachine(store),
    pairingKey: loadPairingKey(dataDirOf(options)),
    close: () => store.close(),
  };
}

/**
 * The running service of this data directory, verified (LMSP section 12): a service holds the
 * data directory's lock, and what answers at the address it recorded says it is this data
 * directory's service. A stale `service.json` (the service crashed, another process now listens
 * there) gives null, so the operator token is never sent anywhere else.
 */
export async function runningService(options: CommonOptions): Promise<ServiceInfo | null> {
  const dataDir = dataDirOf(options);
  // The file says where to send the operator token: read only from a folder nobody else can write.
  assertPrivateDataDir(dataDir);
  const info = readServiceFile(dataDir);
  if (!info) return null;
  // The lock must be held by the service the file names: not by this process (a pull without a
  // service holds it), nor by a process that is gone.
  if (info.pid === process.pid || !processAlive(info.pid) || !isDataDirLocked(dataDir)) return null;
  const expectedId = readServiceId(dataDir);
  if (!expectedId || info.id !== expectedId) return null;
  try {
    const answer = await fetch(`${info.url}/v1/service`, { signal: AbortSignal.timeout(5000) });
    if (!answer.ok) return null;
    const service = (await answer.json()) as Partial<ServiceObject>;
    return service.id === expectedId ? info : null;
  } catch {
    return null;
  }
}

function readServiceFile(dataDir: string): ServiceInfo | null {
  const path = join(dataDir, SERVICE_FILE);
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as ServiceInfo;
  } catch {
    return null;
  }
}

/**
 * Who holds a data directory for which no service answers: a service that started and no longer
 * answers (stopped, hung), another process (a service still starting, a pull without a service),
 * or nobody (null).
 */
export function holderOfSilentDataDir(dataDir: string): { url: string; pid: number } | 'another process' | null {
  if (!isDataDirLocked(dataDir)) return null;
  const info = readServiceFile(dataDir);
  return info && info.pid !== process.pid && processAlive(info.pid) ? { url: info.url, pid: info.pid } : 'another process';
}

function processAlive(pid: unknown): boolean {
  if (typeof pid !== 'number' || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the data directory's lock for this process (`lmsp serve`, or a command that works on the
 * data directory while no service runs). Holding it, this process knows that no service runs, so
 * a `service.json` left by one that crashed is stale: it is removed, so that no command of this
 * data directory trusts whatever listens at its address now (LMSP 12).
 */
export function lockDataDirForThisProcess(dataDir: string): DataDirLock {
  const lock = lockDataDir(dataDir);
  rmSync(join(dataDir, SERVICE_FILE), { force: true });
  return lock;
}

/** A client of the verified running service, authenticated with the operator token the service keeps; null when none runs. */
export async function serviceClient(options: CommonOptions): Promise<LmspClient | null> {
  const info = await runningService(options);
  if (!info) return null;
  const token = readOperatorToken(dataDirOf(options));
  if (!token) throw new CliError(`no operator token in ${dataDirOf(options)}; restart the service to create one`, EXIT_NOT_RUNNING);
  return new LmspClient({ baseUrl: info.url, token });
}

/** A client of the running service, for commands that need one. */
export async function operatorClient(options: CommonOptions): Promise<LmspClient> {
  const client = await serviceClient(options);
  if (client) return client;
  const dataDir = dataDirOf(options);
  // Held, yet no service answers: `lmsp serve` would be refused, so it is not the advice to give.
  if (isDataDirLocked(dataDir)) {
    throw new CliError(`the lmsp service is not answering for ${dataDir}: another lmsp process holds the data directory (a service still starting, or a command such as \`lmsp models pull\` run without one); wait for it to end, or stop it`, EXIT_NOT_RUNNING);
  }
  throw new CliError(`the lmsp service is not running for ${dataDir}; start it with \`lmsp serve\``, EXIT_NOT_RUNNING);
}

function databaseErrorCode(exitCode: number): string {
  if (exitCode === EXIT_DATABASE_TOO_NEW) return 'database_too_new';
  if (exitCode === EXIT_DATABASE_UNAVAILABLE) return 'database_unavailable';
  return 'database_not_usable';
}

/** Whether an error is the connection to the service failing, not an answer of the service. */
export function isConnectionFailure(error: unknown): boolean {
  if (!(error instanceof Error) || error instanceof LmspApiError) return false;
  const codes = [error, error.cause].map((candidate) => (candidate as NodeJS.ErrnoException | undefined)?.code);
  if (codes.some((code) => code !== undefined && /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|UND_ERR_)/.test(code))) return true;
  // What fetch throws when it cannot connect, and when a body it is reading is cut.
  return error.name === 'TypeError' && (error.message === 'fetch failed' || error.message === 'terminated');
}

/** What `--json` prints on stdout when a command fails: the API's error shape. */
export interface CliFailure {
  code: string;
  message: string;
  /** The HTTP status, when the service refused the request. */
  status?: number;
  param?: string | null;
}

/** A known failure as the command reports it: its document for `--json`, its message, its exit code. */
export interface DescribedFailure {
  failure: CliFailure;
  text: string;
  exitCode: number;
}

/** What a command that failed with `error` says, or null for an error nobody foresaw (a bug: its stack is shown). */
export function describeFailure(error: unknown): DescribedFailure | null {
  const described = (failure: CliFailure, text: string, exitCode: number): DescribedFailure => ({ failure, text, exitCode });
  if (error instanceof CliError) return described({ code: error.code, message: error.message }, error.message, error.exitCode);
  if (error instanceof DatabaseOpenError) return described({ code: databaseErrorCode(error.exitCode), message: error.message }, error.message, error.exitCode);
  if (error instanceof ConfigError) return described({ code: 'invalid_usage', message: error.message }, error.message, EXIT_USAGE);
  if (isStorageUnavailable(error)) {
    // The command's own write to the database failed (not an answer of the service): no HTTP
    // status to report, but the database's exit code and what SQLite said.
    const message = `cannot write the database: ${(sqliteErrorOf(error) as Error).message} (a full disk, a read-only file or file system, or another program holding it locked)`;
    return described({ code: databaseErrorCode(EXIT_DATABASE_UNAVAILABLE), message }, message, EXIT_DATABASE_UNAVAILABLE);
  }
  if (error instanceof LmspApiError || error instanceof ServiceError) {
    return described({ status: error.status, code: error.code, message: error.message, param: error.param }, `${error.message} (${error.status} ${error.code})`, 1);
  }
  const code = (error as NodeJS.ErrnoException).code ?? ((error as Error).cause as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ECONNREFUSED') {
    const message = 'cannot reach the lmsp service: is it running?';
    return described({ code: 'service_not_running', message }, message, EXIT_NOT_RUNNING);
  }
  if (isConnectionFailure(error)) {
    // The service went away in the middle of the command (it stopped, or was killed).
    const message = `lost the connection to the lmsp service (${String(((error as Error).cause as Error | undefined)?.message ?? (error as Error).message)})`;
    return described({ code: 'connection_lost', message }, message, 1);
  }
  return null;
}

/**
 * Runs a command's action, turning known failures into a message and an exit code. With
 * `--json` the failure is the command's one JSON document on stdout too (LMSP 12), unless the
 * command had already begun printing its own.
 */
export function action<A extends unknown[]>(run: (...args: A) => Promise<void> | void): (...args: A) => Promise<void> {
  return async (...args: A) => {
    const json = (args.at(-1) as Command | undefined)?.opts?.().json === true;
    try {
      await run(...args);
    } catch (error) {
      const described = describeFailure(error);
      if (!described) throw error;
      fail(described.text, described.exitCode, json ? described.failure : undefined);
    }
  };
}

/** Ends the command: the message on stderr and, for `--json`, the failure as its document on stdout. */
export function fail(message: string, exitCode: number, failure?: CliFailure): never {
  process.stderr.write(`lmsp: ${message}\n`);
  if (failure && !jsonDocumentBegun) printJson({ error: failure });
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
