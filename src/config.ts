/**
 * Every setting of the service in one place: its flag, its `LMSP_*` variable, whether it may be
 * stored in `service_config`, its default and its parser.
 *
 * Precedence (LMSP section 2): command-line flag > environment variable > stored value > default.
 */
import { availableParallelism, homedir, hostname } from 'node:os';
import { isIP } from 'node:net';
import { isAbsolute, join, resolve } from 'node:path';
import { formatDuration, parseDuration } from './time.js';

export interface DebugDelays {
  /** Each model load takes at least this long. */
  loadDelayMs: number;
  /** Each generated token takes at least this long. */
  tokenDelayMs: number;
  /** A worker waits this long before acting on a cancel. */
  cancelDelayMs: number;
  /** Caps the database at this many pages, so that tests can fill it like a full disk (0: off). */
  dbMaxPages: number;
  /** 1: creates are written by the writer thread, not the thread that answers requests (benchmarks compare both). */
  writerThread?: number;
}

export interface ServiceConfig {
  host: string;
  port: number;
  dataDir: string;
  modelsDir: string;
  name: string;
  retentionMs: number;
  sweepIntervalMs: number;
  parallel: number;
  /** How the slots of a model are served: a runner process each, sequences of one context in one runner, or `auto` (engine/parallel-mode.ts). */
  parallelMode: 'auto' | 'processes' | 'sequences';
  keepAliveMs: number;
  maxLoadedModels: number;
  maxRestarts: number;
  idempotencyTtlMs: number;
  bodyLimitBytes: number;
  threads: number;
  gpu: 'auto' | 'cpu' | 'cuda' | 'vulkan' | 'metal';
  cpuAffinity: 'auto' | 'off';
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Host names accepted besides loopback and the listen address (LMSP section 2). */
  allowedHosts: string[];
  /** Origins, besides the service's own, whose pages may call the API (CORS; LMSP section 2). */
  allowedOrigins: string[];
  maxStreamsPerClient: number;
  maxStreams: number;
  /** 0: auto, as many as the open-file limit allows. */
  maxConnections: number;
  maxUnfinishedTasksPerClient: number;
  /** LMSP 12: JSON lines, readable lines, or readable only on a terminal. */
  logFormat: 'auto' | 'json' | 'pretty';
  debug: DebugDelays;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Parsed = string | number | string[];

export interface OptionDefinition {
  key: Exclude<keyof ServiceConfig, 'debug' | 'dataDir'>;
  flag: string;
  env: string;
  description: string;
  /** The default as a user would write it; null when it depends on other settings. */
  defaultText: string;
  parse: (text: string) => Parsed;
  /** What `lmsp config set` stores for a value, where the text alone would mean something else later (a relative path). */
  storedAs?: (text: string) => string;
}

/** A duration; `minMs` for a period, which 0 would run without pause. */
function durationParser(what: string, allowForever = false, bounds: { minMs?: number } = {}) {
  return (text: string) => {
    const value = parseDuration(text, { allowForever });
    if (value === null) {
      throw new Error(`expected a ${what} like 500ms, 30s, 10m, 12h or 7d${allowForever ? ", or 'forever'" : ''}`);
    }
    if (value === Infinity) return value;
    if (bounds.minMs !== undefined && value < bounds.minMs) throw new Error(`expected a ${what} of at least ${formatDuration(bounds.minMs)}`);
    return value;
  };
}

function integerParser(min: number, max: number) {
  return (text: string) => {
    if (!/^\d+$/.test(text.trim())) throw new Error(`expected an integer from ${min} to ${max}`);
    const value = Number(text);
    if (value < min || value > max) throw new Error(`expected an integer from ${min} to ${max}`);
    return value;
  };
}

/** `auto` (0) or an integer within bounds. */
function autoOrIntegerParser(min: number, max: number) {
  const integer = integerParser(min, max);
  return (text: string) => {
    if (text === 'auto') return 0;
    try {
      return integer(text);
    } catch {
      throw new Error(`expected auto or an integer from ${min} to ${max}`);
    }
  };
}

function choiceParser(choices: readonly string[]) {
  return (text: string) => {
    if (!choices.includes(text)) throw new Error(`expected one of ${choices.join(', ')}`);
    return text;
  };
}

const SIZE_UNITS: Record<string, number> = { '': 1, b: 1, kb: 1000, kib: 1024, mb: 1e6, mib: 1024 ** 2, gb: 1e9, gib: 1024 ** 3 };

function sizeParser(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  const unit = match ? SIZE_UNITS[match[2]!.toLowerCase()] : undefined;
  if (!match || unit === undefined) throw new Error('expected a size like 1048576, 512KiB or 1MiB');
  const bytes = Math.round(Number(match[1]) * unit);
  if (bytes < 1) throw new Error('expected a size of at least 1 byte');
  return bytes;
}

/** A byte count as `--body-limit` takes it: `1MiB`, `512KiB`, or bytes when no binary unit divides it. */
export function formatSize(bytes: number): string {
  for (const [unit, size] of [['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return String(bytes);
}

function listOf(text: string): string[] {
  return text.split(',').map((item) => item.trim()).filter(Boolean);
}

const HOST_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?$/i;

/**
 * An IP address, or a host name (RFC 1123). A name made only of numbers (`127.1`, `0x7f.1`) is
 * none: it is an IPv4 address in a form the resolver reads but a Host header never matches.
 */
function hostParser(text: string): string {
  const numbersOnly = text.replace(/\.$/, '').split('.').every((label) => /^(0x[0-9a-f]*|[0-9]+)$/i.test(label));
  if (isIP(text) !== 0 || (HOST_NAME.test(text) && !numbersOnly)) return text;
  throw new Error('expected an IP address or a host name');
}

function nameParser(text: string): string {
  if (text.trim() === '') throw new Error('expected a name (without it, the host name is the default)');
  return text;
}

function hostListParser(text: string): string[] {
  const hosts = listOf(text).map((host) => host.toLowerCase());
  for (const host of hosts) {
    // The caller names the whole value; an item is named only when the list has several.
    const which = hosts.length > 1 ? ` ('${host}' is not)` : '';
    if (!/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)$/.test(host)) throw new Error(`expected host names without ports${which}`);
  }
  return hosts;
}

function originListParser(text: string): string[] {
  const origins = listOf(text);
  return origins.map((origin) => {
    // The caller names the whole value; an item is named only when the list has several.
    const which = origins.length > 1 ? ` ('${origin}' is not)` : '';
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      throw new Error(`expected origins like http://app.example:3000${which}`);
    }
    // Scheme, host and port alone. A default port written out (http://app.example:80) is the
    // same origin; browsers send it without the port, as `origin` writes it.
    const bare = url.pathname === '/' && !url.search && !url.hash && !url.username && !url.password;
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !bare) {
      throw new Error(`expected origins like http://app.example:3000 (scheme, host and port only)${which}`);
    }
    return url.origin;
  });
}

/** Automatic thread count: on small machines one decode thread is far faster than several
 * (measured 20-400x on 2 cores, where other threads contend with the service itself). */
export function defaultThreads(): number {
  const cores = availableParallelism();
  return cores <= 4 ? 1 : Math.floor(cores / 2);
}

export const OPTIONS: readonly OptionDefinition[] = [
  { key: 'host', flag: '--host', env: 'LMSP_HOST', defaultText: '127.0.0.1',
    description: 'address to listen on (loopback unless you mean otherwise)', parse: hostParser },
  { key: 'port', flag: '--port', env: 'LMSP_PORT', defaultText: '5677',
    description: 'TCP port (0 picks a free one)', parse: integerParser(0, 65535) },
  { key: 'modelsDir', flag: '--models-dir', env: 'LMSP_MODELS_DIR', defaultText: '<data-dir>/models',
    description: 'folder that POST /v1/models may register files from', parse: (t) => resolve(t),
    // Relative to the folder `lmsp config set` runs in, as it reports, not to wherever the service starts.
    storedAs: (t) => resolve(t) },
  { key: 'name', flag: '--name', env: 'LMSP_NAME', defaultText: '<host name>',
    description: 'service name shown by GET /v1/service', parse: nameParser },
  { key: 'retentionMs', flag: '--retention', env: 'LMSP_RETENTION', defaultText: '7d',
    description: "how long finished tasks are kept ('forever' keeps everything)", parse: durationParser('duration', true) },
  { key: 'sweepIntervalMs', flag: '--sweep-interval', env: 'LMSP_SWEEP_INTERVAL', defaultText: '10m',
    description: 'period of the retention sweeper', parse: durationParser('duration', false, { minMs: 100 }) },
  { key: 'parallel', flag: '--parallel', env: 'LMSP_PARALLEL', defaultText: '1',
    description: 'tasks generated at the same time', parse: integerParser(1, 64) },
  { key: 'parallelMode', flag: '--parallel-mode', env: 'LMSP_PARALLEL_MODE', defaultText: 'auto',
    description: 'how the --parallel slots of a model run: processes (a runner process each), sequences (one runner, one context with a sequence per slot), or auto (sequences on a GPU backend, processes on the CPU)',
    parse: choiceParser(['auto', 'processes', 'sequences']) },
  { key: 'keepAliveMs', flag: '--keep-alive', env: 'LMSP_KEEP_ALIVE', defaultText: '5m',
    description: 'how long a model stays loaded after its last use', parse: durationParser('duration', true) },
  { key: 'maxLoadedModels', flag: '--max-loaded-models', env: 'LMSP_MAX_LOADED_MODELS', defaultText: '1',
    description: 'models loaded at the same time', parse: integerParser(1, 64) },
  { key: 'maxRestarts', flag: '--max-restarts', env: 'LMSP_MAX_RESTARTS', defaultText: '3',
    description: 'interruptions (restarts of the service, deaths of its runner process) a running task survives before it fails', parse: integerParser(0, 1000) },
  { key: 'idempotencyTtlMs', flag: '--idempotency-ttl', env: 'LMSP_IDEMPOTENCY_TTL', defaultText: '24h',
    description: 'how long Idempotency-Key results are kept', parse: durationParser('duration') },
  { key: 'bodyLimitBytes', flag: '--body-limit', env: 'LMSP_BODY_LIMIT', defaultText: '1MiB',
    description: 'largest accepted request body', parse: sizeParser },
  { key: 'threads', flag: '--threads', env: 'LMSP_THREADS', defaultText: 'auto',
    description: 'CPU threads per generation (auto: 1 on machines of up to 4 cores, else half the cores)',
    parse: autoOrIntegerParser(1, 1024) },
  { key: 'gpu', flag: '--gpu', env: 'LMSP_GPU', defaultText: 'auto',
    description: 'llama.cpp backend: auto (a GPU build where the machine has one), cpu, cuda, vulkan or metal',
    parse: choiceParser(['auto', 'cpu', 'cuda', 'vulkan', 'metal']) },
  { key: 'cpuAffinity', flag: '--cpu-affinity', env: 'LMSP_CPU_AFFINITY', defaultText: 'auto',
    description: 'auto: on Linux, give each runner CPUs of its own when the service still keeps one (taskset); off: never',
    parse: choiceParser(['auto', 'off']) },
  { key: 'allowedHosts', flag: '--allowed-hosts', env: 'LMSP_ALLOWED_HOSTS', defaultText: '(none)',
    description: 'comma-separated host names accepted in Host besides localhost, 127.0.0.1, [::1] and the listen address', parse: hostListParser },
  { key: 'allowedOrigins', flag: '--allowed-origins', env: 'LMSP_ALLOWED_ORIGINS', defaultText: '(none)',
    description: "comma-separated origins (http://app.example:3000) whose pages may call the API besides the service's own", parse: originListParser },
  { key: 'maxStreamsPerClient', flag: '--max-streams-per-client', env: 'LMSP_MAX_STREAMS_PER_CLIENT', defaultText: '16',
    description: 'open event streams one client may hold', parse: integerParser(1, 100_000) },
  { key: 'maxStreams', flag: '--max-streams', env: 'LMSP_MAX_STREAMS', defaultText: '512',
    description: 'open event streams in total', parse: integerParser(1, 1_000_000) },
  { key: 'maxConnections', flag: '--max-connections', env: 'LMSP_MAX_CONNECTIONS', defaultText: 'auto',
    description: 'open TCP connections; past it a new connection is closed at once (auto: as many as the open-file limit leaves beside the 256 files the service keeps for itself; a number is lowered to that too)',
    parse: autoOrIntegerParser(1, 1_000_000) },
  { key: 'maxUnfinishedTasksPerClient', flag: '--max-unfinished-tasks-per-client', env: 'LMSP_MAX_UNFINISHED_TASKS_PER_CLIENT', defaultText: '1000',
    description: 'unfinished tasks one client may have; past it creates get 429 too_many_tasks', parse: integerParser(1, 100_000_000) },
  { key: 'logLevel', flag: '--log-level', env: 'LMSP_LOG_LEVEL', defaultText: 'info',
    description: 'log level', parse: choiceParser(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']) },
  { key: 'logFormat', flag: '--log-format', env: 'LMSP_LOG_FORMAT', defaultText: 'auto',
    description: 'log lines: json, pretty (readable, colored on a terminal) or auto (pretty on a terminal, else json)',
    parse: choiceParser(['auto', 'json', 'pretty']) },
];

export const DEBUG_VARIABLES = {
  loadDelayMs: 'LMSP_DEBUG_LOAD_DELAY_MS',
  tokenDelayMs: 'LMSP_DEBUG_TOKEN_DELAY_MS',
  cancelDelayMs: 'LMSP_DEBUG_CANCEL_DELAY_MS',
  dbMaxPages: 'LMSP_DEBUG_DB_MAX_PAGES',
  writerThread: 'LMSP_DEBUG_WRITER_THREAD',
} as const satisfies Record<keyof DebugDelays, string>;

export const DATA_DIR_ENV = 'LMSP_DATA_DIR';
/** Prefix of the keys under which settings are stored in `service_config`. */
export const STORED_CONFIG_PREFIX = 'config.';

/**
 * The data directory: flag > LMSP_DATA_DIR > $XDG_DATA_HOME/lmsp > ~/.local/share/lmsp (section
 * 12). A relative XDG_DATA_HOME is ignored, as the XDG Base Directory specification requires:
 * it would put the data wherever the command happened to run.
 */
export function resolveDataDir(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (flag) return resolve(flag);
  if (env[DATA_DIR_ENV]) return resolve(env[DATA_DIR_ENV]);
  if (env.XDG_DATA_HOME && isAbsolute(env.XDG_DATA_HOME)) return join(env.XDG_DATA_HOME, 'lmsp');
  return join(homedir(), '.local', 'share', 'lmsp');
}

export function findOption(nameOrKey: string): OptionDefinition | undefined {
  const normalized = nameOrKey.replace(/^--/, '');
  return OPTIONS.find((option) => option.key === nameOrKey || option.flag === `--${normalized}`);
}

function parseWithSource(option: OptionDefinition, text: string, source: string): Parsed {
  try {
    return option.parse(text);
  } catch (error) {
    throw new ConfigError(`${source}: ${(error as Error).message}, got '${text}'`);
  }
}

function debugDelay(env: NodeJS.ProcessEnv, name: string): number {
  const text = env[name];
  if (text === undefined || text === '') return 0;
  if (!/^\d+$/.test(text)) throw new ConfigError(`${name}: expected a whole number of milliseconds, got '${text}'`);
  return Number(text);
}

export interface ConfigSources {
  /** Flag values as typed, keyed by option key. */
  flags?: Partial<Record<OptionDefinition['key'], string>>;
  dataDirFlag?: string;
  env?: NodeJS.ProcessEnv;
  /** Values stored in service_config, keyed by option key. */
  stored?: Partial<Record<OptionDefinition['key'], string>>;
}

export function resolveConfig(sources: ConfigSources): ServiceConfig {
  const env = sources.env ?? process.env;
  const dataDir = resolveDataDir(sources.dataDirFlag, env);
  const values: Record<string, Parsed> = {};
  for (const option of OPTIONS) {
    const flag = sources.flags?.[option.key];
    const fromEnv = env[option.env];
    const stored = sources.stored?.[option.key];
    if (flag !== undefined) values[option.key] = parseWithSource(option, flag, option.flag);
    else if (fromEnv !== undefined && fromEnv !== '') values[option.key] = parseWithSource(option, fromEnv, option.env);
    else if (stored !== undefined) values[option.key] = parseWithSource(option, stored, `stored ${option.flag.slice(2)}`);
  }
  const config: ServiceConfig = {
    host: (values.host as string) ?? '127.0.0.1',
    port: (values.port as number) ?? 5677,
    dataDir,
    modelsDir: (values.modelsDir as string) ?? join(dataDir, 'models'),
    name: (values.name as string) ?? hostname(),
    retentionMs: (values.retentionMs as number) ?? parseDuration('7d')!,
    sweepIntervalMs: (values.sweepIntervalMs as number) ?? parseDuration('10m')!,
    parallel: (values.parallel as number) ?? 1,
    parallelMode: ((values.parallelMode as string) ?? 'auto') as ServiceConfig['parallelMode'],
    keepAliveMs: (values.keepAliveMs as number) ?? parseDuration('5m')!,
    maxLoadedModels: (values.maxLoadedModels as number) ?? 1,
    maxRestarts: (values.maxRestarts as number) ?? 3,
    idempotencyTtlMs: (values.idempotencyTtlMs as number) ?? parseDuration('24h')!,
    bodyLimitBytes: (values.bodyLimitBytes as number) ?? 1024 * 1024,
    threads: (values.threads as number) || defaultThreads(),
    gpu: ((values.gpu as string) ?? 'auto') as ServiceConfig['gpu'],
    cpuAffinity: ((values.cpuAffinity as string) ?? 'auto') as ServiceConfig['cpuAffinity'],
    logLevel: ((values.logLevel as string) ?? 'info') as ServiceConfig['logLevel'],
    allowedHosts: (values.allowedHosts as string[]) ?? [],
    allowedOrigins: (values.allowedOrigins as string[]) ?? [],
    maxStreamsPerClient: (values.maxStreamsPerClient as number) ?? 16,
    maxStreams: (values.maxStreams as number) ?? 512,
    maxConnections: (values.maxConnections as number) ?? 0,
    maxUnfinishedTasksPerClient: (values.maxUnfinishedTasksPerClient as number) ?? 1000,
    logFormat: ((values.logFormat as string) ?? 'auto') as ServiceConfig['logFormat'],
    debug: {
      loadDelayMs: debugDelay(env, DEBUG_VARIABLES.loadDelayMs),
      tokenDelayMs: debugDelay(env, DEBUG_VARIABLES.tokenDelayMs),
      cancelDelayMs: debugDelay(env, DEBUG_VARIABLES.cancelDelayMs),
      dbMaxPages: debugDelay(env, DEBUG_VARIABLES.dbMaxPages),
      writerThread: debugDelay(env, DEBUG_VARIABLES.writerThread),
    },
  };
  return config;
}

/** The effective settings as a user would write them, for `lmsp serve --json` and doctor. */
export function describeConfig(config: ServiceConfig): Record<string, string | number> {
  return {
    host: config.host,
    port: config.port,
    data_dir: config.dataDir,
    models_dir: config.modelsDir,
    name: config.name,
    retention: formatDuration(config.retentionMs),
    sweep_interval: formatDuration(config.sweepIntervalMs),
    parallel: config.parallel,
    parallel_mode: config.parallelMode,
    keep_alive: formatDuration(config.keepAliveMs),
    max_loaded_models: config.maxLoadedModels,
    max_restarts: config.maxRestarts,
    idempotency_ttl: formatDuration(config.idempotencyTtlMs),
    body_limit: formatSize(config.bodyLimitBytes),
    threads: config.threads,
    gpu: config.gpu,
    cpu_affinity: config.cpuAffinity,
    log_level: config.logLevel,
    allowed_hosts: config.allowedHosts.join(','),
    allowed_origins: config.allowedOrigins.join(','),
    max_streams_per_client: config.maxStreamsPerClient,
    max_streams: config.maxStreams,
    max_connections: config.maxConnections || 'auto',
    max_unfinished_tasks_per_client: config.maxUnfinishedTasksPerClient,
    log_format: config.logFormat,
  };
}
