/**
 * The service's composition root: open the store, recover (LMSP 11.3), sweep (section 10), then
 * listen. Nothing is accepted before recovery is done (section 3: /healthz answers only then).
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { isIP } from 'node:net';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ensureOperatorToken } from './auth/clients.js';
import { loadPairingKey } from './auth/pairing-key.js';
import { writeNewPrivateFile } from './auth/private-file.js';
import { FailureRateLimiter } from './auth/rate-limit.js';
import { describeConfig, type ServiceConfig } from './config.js';
import { affinityForThisMachine } from './engine/cpu-affinity.js';
import { chooseParallelMode, probeBackend } from './engine/parallel-mode.js';
import { RunnerPool } from './engine/runner-pool.js';
import { buildApp } from './http/app.js';
import { ConnectionRegistry } from './http/connections.js';
import { ServiceMetrics } from './http/metrics.js';
import { ModelRegistry } from './models/registry.js';
import { SOFTWARE_VERSION } from './paths.js';
import { Store } from './store/index.js';
import { WAL_SIZE_LIMIT_BYTES } from './store/db.js';
import { newTaskMachine, type TaskCore } from './tasks/core.js';
import { TaskEventBus } from './tasks/event-bus.js';
import { recoverUnfinishedTasks } from './tasks/recovery.js';
import { settleOrphanedRequests } from './tasks/orphaned-requests.js';
import { Scheduler, type SchedulerLog } from './tasks/scheduler.js';
import { PullWorkers } from './tasks/pull-worker.js';
import { pullSettingsFromEnvironment } from './models/pull-source.js';
import { taskOfStateFile } from './engine/state-files.js';
import { Maintenance } from './tasks/maintenance.js';
import { retentionCutoff } from './tasks/sweeper.js';
import { logTaskChanges } from './tasks/task-log.js';
import { TaskTimeline } from './tasks/task-timeline.js';
import { formatDuration, nowSeconds } from './time.js';

export const SERVICE_FILE = 'service.json';
export const STATE_DIR = 'state';
const SSE_HEARTBEAT_MS = 15_000;
/**
 * How long a stop waits for the requests it is answering (a create being committed, a model file
 * being hashed) before it cuts their connections.
 */
const STOP_GRACE_MS = 5_000;
/** How often the service checks that its database is still the file at its path. */
const DATABASE_WATCH_MS = 2_000;

export interface ServiceInfo {
  url: string;
  pid: number;
  id: string;
  version: string;
  started_at: number;
  /** The retention in force (`7d`, `forever`): `lmsp gc` sweeps by it while this service runs (LMSP 10). */
  retention?: string;
  /** Every setting as this service runs with it (flags included), for `lmsp config ls`. */
  settings?: Record<string, string | number>;
}

export interface RunningService {
  url: string;
  info: ServiceInfo;
  app: FastifyInstance;
  store: Store;
  /**
   * Called once if the database file is deleted or replaced while the service runs: nothing it
   * commits from then on would be kept, so the caller should stop it (`lmsp serve` exits 74).
   */
  onDatabaseLost(listener: (reason: string) => void): void;
  close(): Promise<void>;
}

export { createLogger } from './logging.js';

function isLoopback(host: string): boolean {
  return host.toLowerCase() === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
}

/** Saved sequence states of tasks that will not resume are of no more use. */
function removeStaleStates(stateDir: string, resumable: () => Set<string>): void {
  if (!existsSync(stateDir)) return;
  const files = readdirSync(stateDir);
  if (files.length === 0) return;
  const keepTaskIds = resumable();
  for (const file of files) {
    const taskId = taskOfStateFile(file);
    if (taskId === null || !keepTaskIds.has(taskId)) rmSync(join(stateDir, file), { force: true });
  }
}

/**
 * The open database, whose file was deleted or replaced while the service ran, copied to a new
 * file beside its path (private to its owner, as the database is); null if it cannot be (a full
 * disk), and then no partial copy is left.
 */
function saveLostDatabase(store: Store, log: Logger): string | null {
  const target = `${store.db.path}.lost-${Date.now()}`;
  const umask = process.umask(0o077);
  try {
    // The whole data directory may have gone with it.
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    store.db.copyTo(target);
    return target;
  } catch (error) {
    rmSync(target, { force: true });
    log.error({ error: String(error) }, 'could not copy the database the service ran on');
    return null;
  } finally {
    process.umask(umask);
  }
}

/**
 * Once the lost database is closed: its copy goes where it was if nothing is there now, else it
 * stays beside the file put there, for the operator. Its log and shared memory, named by the path,
 * go in both cases (the copy holds what they held): left there, the next open would replay them
 * onto whatever file is at the path. With no copy, a log beside no database stays, so that the
 * next start refuses rather than starting empty without a word.
 */
function settleLostDatabase(path: string, saved: string | null, log: Logger): void {
  const replaced = existsSync(path);
  if (saved === null && !replaced) return;
  for (const suffix of ['-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
  if (saved === null) return;
  if (replaced) {
    log.error({ copy: saved }, `another file is at ${path} now, and it was left as it is: the database the service ran on is at ${saved}`);
    return;
  }
  renameSync(saved, path);
  log.error(`the database the service ran on, written back to ${path} with everything it committed: start the service again to go on`);
}

/** Opens the store for a service whose settings come partly from it (`service_config`). */
export function openServiceStore(dataDir: string, bus: TaskEventBus): Store {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  return Store.open(dataDir, { notifier: bus });
}

export async function startService(config: ServiceConfig, store: Store, bus: TaskEventBus, log: Logger): Promise<RunningService> {
  // LMSP 5.1: LMSP_HF_ENDPOINT and HF_TOKEN; a malformed endpoint stops the start before anything is done.
  const pullSettings = pullSettingsFromEnvironment();
  // LMSP_DEBUG_DB_MAX_PAGES: a database that cannot grow past this size behaves as on a full disk.
  if (config.debug.dbMaxPages > 0) store.db.sqlite.pragma(`max_page_count = ${config.debug.dbMaxPages}`);
  // WAL checkpoints belong to the maintenance worker (started below): on this connection a commit
  // never waits for one, recovery's included.
  store.db.sqlite.pragma('wal_autocheckpoint = 0');
  if (store.db.upgradedFrom !== null) {
    log.info({ from: store.db.upgradedFrom, to: store.db.schemaVersion }, `database upgraded from schema ${store.db.upgradedFrom} to ${store.db.schemaVersion}`);
  }
  const serviceId = store.db.transaction(() => store.config.ensureServiceId());
  const registry = new ModelRegistry(store, config.modelsDir);
  const followed = await registry.followDataDir();
  if (followed > 0) log.info({ models: followed }, 'the data directory has moved: its models are the files inside it now');
  await registry.ensureBuiltin();
  const machine = newTaskMachine(store);

  // LMSP 15 and 12: metrics and task logs follow every committed change from here on, recovery's
  // included; the engine, made after recovery, is read at scrape time.
  let engine: RunnerPool | null = null;
  const metrics = new ServiceMetrics({ store, loadedModels: () => engine?.loadedModelIds().size ?? 0 });
  store.db.onCommit = (seconds) => metrics.observeCommit(seconds);
  const timeline = new TaskTimeline(bus);
  metrics.watch(timeline);
  logTaskChanges(timeline, (fields, message) => log.info(fields, message));

  // `--parallel-mode auto` may ask llama.cpp for its backend, in a runner process of its own:
  // asked now, it answers while recovery runs.
  const stateDir = join(config.dataDir, STATE_DIR);
  const runnerSettings = { gpu: config.gpu, threads: config.threads, stateDir, tokenDelayMs: config.debug.tokenDelayMs, loadDelayMs: config.debug.loadDelayMs };
  const parallelMode = chooseParallelMode(config.parallelMode, config.parallel, config.gpu, () => probeBackend(runnerSettings));

  // LMSP 11.2: at startup, every unfinished task gets its restart policy, before anything else.
  const started = performance.now();
  timeline.beginRecovery();
  const report = recoverUnfinishedTasks(store, machine, config.maxRestarts);
  timeline.endRecovery();
  metrics.observeRecovery(report);
  log.info({ ...report, ms: Math.round(performance.now() - started) }, 'recovered unfinished tasks');
  removeStaleStates(stateDir, () => new Set(store.tasks.list({ clientId: null, statuses: ['running'], afterSeq: null, limit: 100_000, order: 'asc' }).tasks.map((task) => task.id)));

  ensureOperatorToken(store, config.dataDir);
  const { mode, reason } = await parallelMode;
  log.info({ parallel: config.parallel, parallel_mode: mode, reason }, `parallel slots run as ${mode}`);
  // With sequences, one runner serves all the slots of a model: as many runners as models loaded at once.
  const sequences = mode === 'sequences';
  const runnerCount = sequences ? Math.min(config.parallel, config.maxLoadedModels) : config.parallel;
  const affinity = await affinityForThisMachine(config.cpuAffinity, runnerCount, config.threads);
  if (affinity.pinned) log.info({ runners: affinity.runnerCpus, service: affinity.serviceCpus.join(',') }, 'runners pinned to CPUs of their own');
  else log.info({ reason: affinity.reason }, 'runners not pinned to CPUs');
  engine = new RunnerPool({
    slots: config.parallel,
    ...(sequences ? { sequencesPerRunner: config.parallel } : {}),
    affinity: affinity.pinned ? affinity : null,
    maxLoadedModels: config.maxLoadedModels,
    keepAliveMs: config.keepAliveMs,
    settings: runnerSettings,
    debug: config.debug,
    log: (level, message, fields) => log[level](fields ?? {}, message),
    onModelLoad: (model, result) => metrics.observeModelLoad(model, result),
  });
  const core: TaskCore = { store, machine, registry, engine, bus, pairingKey: loadPairingKey(config.dataDir), stopping: false };
  const workerLog: SchedulerLog = {
    info: (message, fields) => log.info(fields ?? {}, message),
    warn: (message, fields) => log.warn(fields ?? {}, message),
    error: (message, fields) => log.error(fields ?? {}, message),
  };
  const scheduler = new Scheduler(core, {
    parallel: config.parallel, maxRestarts: config.maxRestarts, log: workerLog,
    onInterrupted: (outcome) => metrics.observeInterruption(outcome),
  });
  // Tasks whose requests died with the process are settled as those requests would have settled
  // them: their keys get the final answer, then `store: false` ones are deleted (LMSP 6, 8, 13).
  const orphaned = settleOrphanedRequests(core, (task, error) => log.error({ task, error: String(error) }, 'could not settle a task whose request died with the process'));
  if (orphaned > 0) log.info({ tasks: orphaned }, 'tasks whose requests died with the process are settled in their place when they finish');
  // LMSP 5.1: pulls download beside the generation slots, with workers of their own.
  const pulls = new PullWorkers(core, pullSettings, { log: workerLog });
  const maintenance = new Maintenance(
    { dataDir: config.dataDir, retentionMs: config.retentionMs, dbMaxPages: config.debug.dbMaxPages, walRestartBytes: WAL_SIZE_LIMIT_BYTES },
    config.sweepIntervalMs,
    { info: (counts) => log.info(counts, 'swept expired records'), error: (message) => log.error(message) },
    () => store.totalChanges(),
    () => store.retention.anythingExpired(retentionCutoff(config.retentionMs), nowSeconds()),
    () => store.db.fileLost() === null && store.db.logLost() === null,
  );
  // LMSP section 10: the sweeper runs after recovery at startup, then periodically. WAL
  // checkpoints move to the maintenance worker too, off the thread that answers requests.
  await maintenance.sweep();
  const recovered = report.failed + report.cancelled + report.requeued + report.resumed + report.idempotencyKeysReleased + report.idempotencyKeysKept;
  maintenance.start({ checkpointNow: recovered > 0 });

  // Creates written by a thread of its own (store/writer.ts), off the thread that answers
  // requests: off unless asked for, as it measured slower so far (BENCHMARKS.md, durable creates).
  if (config.debug.writerThread) {
    store.startWriter({ dataDir: config.dataDir, dbMaxPages: config.debug.dbMaxPages });
  }

  const connections = new ConnectionRegistry({ perClient: config.maxStreamsPerClient, total: config.maxStreams });
  const app = await buildApp({
    config, serviceId, core, scheduler, connections,
    pairingLimiter: new FailureRateLimiter(),
    logger: log,
    heartbeatMs: SSE_HEARTBEAT_MS,
    metrics,
    pulls,
  });
  scheduler.start();
  pulls.start();
  // Stops taking work and ends what runs, for a stop and for a start that cannot listen.
  const stopWork = async () => {
    core.stopping = true;
    // Streams and waits end now; the requests being answered finish within the grace period.
    connections.endAll();
    const cut = setTimeout(() => app.server.closeAllConnections(), STOP_GRACE_MS);
    await app.close();
    clearTimeout(cut);
    await scheduler.stop();
    await pulls.stop();
    await maintenance.stop();
    await engine.close();
    timeline.close();
    store.db.onCommit = null;
  };
  let url: string;
  try {
    url = await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    // Nothing was served: the database is closed as at a stop, its log written into it.
    await stopWork();
    await store.close();
    throw error;
  }
  if (!isLoopback(config.host)) {
    log.warn({ host: config.host }, 'listening beyond loopback: anyone who can reach this port can try pairing codes and use paired tokens');
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const displayHost = config.host.includes(':') ? `[${config.host}]` : config.host;
  const info: ServiceInfo = { url: `http://${displayHost}:${port}`, pid: process.pid, id: serviceId, version: SOFTWARE_VERSION, started_at: Math.floor(Date.now() / 1000),
    retention: formatDuration(config.retentionMs), settings: { ...describeConfig(config), port } };
  const serviceFile = join(config.dataDir, SERVICE_FILE);
  // Made new, then renamed into place.
  writeNewPrivateFile(`${serviceFile}.tmp`, `${JSON.stringify(info)}\n`);
  renameSync(`${serviceFile}.tmp`, serviceFile);
  log.info({ url: info.url, listening: url, data_dir: config.dataDir, id: serviceId }, `lmsp ${SOFTWARE_VERSION} listening on ${info.url}`);

  const lostListeners: Array<(reason: string) => void> = [];
  store.db.logLost(); // notes the log as it is now
  const watchdog = setInterval(() => {
    const fileLost = store.db.fileLost();
    const reason = fileLost ?? store.db.logLost();
    if (reason === null) return;
    clearInterval(watchdog);
    // A lost log only stops the service: its clean close writes what the log holds into the database.
    log.error({ data_dir: config.dataDir }, fileLost !== null ? `${reason}: what the service writes is no longer kept there`
      : `${reason}: stopping, so that what it holds is written into the database while it can be`);
    for (const listener of lostListeners) listener(reason);
  }, DATABASE_WATCH_MS);
  watchdog.unref();

  let closing: Promise<void> | null = null;
  return {
    url: info.url,
    info,
    app,
    store,
    onDatabaseLost: (listener) => lostListeners.push(listener),
    close: () => {
      closing ??= (async () => {
        clearInterval(watchdog);
        await stopWork();
        // The database the service ran on, its last commits included, copied out before it closes
        // (a file once lost stays lost, so this also covers a stop before the watchdog saw it go).
        const lost = store.db.fileLost() !== null;
        const saved = lost ? saveLostDatabase(store, log) : null;
        await store.close();
        if (lost) settleLostDatabase(store.db.path, saved, log);
        rmSync(serviceFile, { force: true });
      })();
      return closing;
    },
  };
}
