/**
 * The crash loop: every round restarts the service with random debug delays, lets the workers
 * act, SIGKILLs it at a random moment, and checks the database and then the API; the end lets
 * every task finish and checks everything once more.
 */
import { setMaxListeners } from 'node:events';
import { rmSync } from 'node:fs';
import type { TaskObject } from '../../src/api/types.js';
import { makeDataDir } from '../../test/helpers/data-dir.js';
import { api, childPids, type TestService } from '../../test/helpers/service.js';
import { sha256Digest, startModelServer, tinyModelBytes } from '../../test/helpers/model-server.js';
import { ACTIONS_CREATING, ACTIONS_DRAINING, runWorker, type RoundContext } from './activity.js';
import {
  checkKeys, drain, finalApiCheck, leftoverPartials, offlineCheck, onlineCheckFresh, recoveryCoverage, unfinishedCount, type CheckInputs, type Sealed,
} from './checks.js';
import { Ledger } from './ledger.js';
import { Neighbour } from './neighbour.js';
import { killAndReap, killService, settledWithin, sleep, startWithRetry } from './processes.js';
import { Random } from './random.js';
import { Info, Violations, type TortureOptions, type TortureReport } from './report.js';
import { referenceTexts } from './shapes.js';

/** Adds the time since the last call to `seconds.<name>` (where the rounds spend their time). */
function phaseTimer(info: Info): (name: string) => void {
  let last = performance.now();
  return (name) => {
    const now = performance.now();
    info.bump(`seconds.${name}`, (now - last) / 1000);
    last = now;
  };
}

/** Service settings for one round: debug delays so tasks are mid-flight (or cancelling) at the kill. */
function roundSettings(random: Random): { env: Record<string, string>; args: string[]; label: string } {
  const tokenDelay = random.pick([0, 2, 5, 10, 20]);
  const cancelDelay = random.pick([0, 0, 0, 0, 200, 1500]);
  const loadDelay = random.pick([0, 0, 0, 0, 0, 300]);
  const parallel = random.pick([1, 2, 3]);
  // The slots as runner processes (the default on a CPU) or as sequences of one context (the
  // default on a GPU): both must survive the same kills.
  const mode = random.pick(['processes', 'sequences']);
  const env: Record<string, string> = {};
  if (tokenDelay) env.LMSP_DEBUG_TOKEN_DELAY_MS = String(tokenDelay);
  if (cancelDelay) env.LMSP_DEBUG_CANCEL_DELAY_MS = String(cancelDelay);
  if (loadDelay) env.LMSP_DEBUG_LOAD_DELAY_MS = String(loadDelay);
  return {
    env, args: ['--parallel', String(parallel), '--parallel-mode', mode],
    label: `token ${tokenDelay}ms, cancel ${cancelDelay}ms, load ${loadDelay}ms, parallel ${parallel} as ${mode}`,
  };
}

/** Waits (bounded) until some task is running; false when none did in time. */
async function waitForRunning(service: TestService, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !signal.aborted) {
    try {
      const answer = await api(service, '/v1/tasks?status=running&limit=1', { signal: AbortSignal.timeout(5000) });
      if (answer.status === 200 && ((await answer.json()) as { data: TaskObject[] }).data.length > 0) return true;
    } catch {
      return false;
    }
    await sleep(50, signal);
  }
  return false;
}

/** One round's client activity, ended by a SIGKILL at a random moment. */
async function activityAndKill(context: Omit<RoundContext, 'signal' | 'createBudget'>,
  options: Required<Pick<TortureOptions, 'workers' | 'minActivityMs' | 'maxActivityMs' | 'maxBacklog' | 'runningShare' | 'runnerKillShare'>>,
  neighbour: Neighbour | null): Promise<void> {
  const { random, service, info } = context;
  const controller = new AbortController();
  // Every request of the round listens to this signal (through AbortSignal.any).
  setMaxListeners(10_000, controller.signal);
  let backlog = 0;
  try {
    backlog = await unfinishedCount(service);
  } catch {
    info.bump('backlog_unknown');
  }
  const draining = backlog > options.maxBacklog;
  if (draining) info.bump('rounds_without_creates');
  const roundContext: RoundContext = { ...context, signal: controller.signal, createBudget: { left: draining ? 0 : random.int(2, 10) } };
  const weights = draining ? ACTIONS_DRAINING : ACTIONS_CREATING;
  // Each worker has its own random stream, so its choices do not depend on the others' timing.
  const workers = Array.from({ length: options.workers }, (_, index) =>
    runWorker({ ...roundContext, random: new Random(random.int(0, 2 ** 31) + index) }, weights));
  if (neighbour) workers.push(neighbour.round(service, new Random(random.int(0, 2 ** 31)), context.round, controller.signal));
  // Each restart loads the model again (more than a second): without this wait most kills would
  // find every task queued or loading, and few running, mid-output.
  const phase = phaseTimer(info);
  if (random.chance(options.runningShare)) {
    if (await waitForRunning(service, 5000, controller.signal)) info.bump('rounds_killed_while_running');
    phase('wait_for_running');
  }
  const activityMs = random.int(options.minActivityMs, options.maxActivityMs);
  if (random.chance(options.runnerKillShare)) {
    // A runner process dies under the running service (LMSP 11.3: each of its tasks by its
    // policy, the service going on); the service's own kill follows later in the round.
    const before = random.int(0, activityMs);
    await sleep(before);
    const runners = childPids(service.pid);
    if (runners.length > 0) {
      try {
        process.kill(random.pick(runners), 'SIGKILL');
        info.bump('runner_kills');
      } catch {
        // it ended meanwhile
      }
    }
    await sleep(activityMs - before);
  } else {
    await sleep(activityMs);
  }
  phase('activity');
  const reap = await killService(service, info);
  controller.abort();
  phase('kill');
  // Requests cut by the kill fail at once; the bound is for a stuck one.
  if (!(await settledWithin(workers, 15_000))) info.bump('workers_still_busy_after_kill');
  phase('workers_settle');
  await reap();
  phase('runners_exit');
}

export async function runTorture(options: TortureOptions = {}): Promise<TortureReport> {
  const settings = {
    rounds: options.rounds ?? 220,
    workers: options.workers ?? 4,
    minActivityMs: options.minActivityMs ?? 100,
    maxActivityMs: options.maxActivityMs ?? 1500,
    runningShare: options.runningShare ?? 0.6,
    runnerKillShare: options.runnerKillShare ?? 0.3,
    maxBacklog: options.maxBacklog ?? 16,
    fullScanEvery: options.fullScanEvery ?? 10,
    finalTimeoutMs: options.finalTimeoutMs ?? 180_000,
  };
  const seed = options.seed ?? (Date.now() % 2 ** 31);
  const log = options.log ?? (() => {});
  const started = Date.now();
  const random = new Random(seed);
  const ledger = new Ledger();
  const violations = new Violations();
  const info = new Info();
  const neighbour = options.neighbour ? new Neighbour(info, violations) : null;
  const sealed = new Map<string, Sealed>();
  log(`torture: ${settings.rounds} rounds, ${settings.workers} workers, seed ${seed}`);
  const references = await referenceTexts(log);
  // Pulls fetch one small model from a loopback server, slowly enough (about two seconds) that
  // kills land in the middle of downloads; the service allows plain http to its endpoint only.
  const modelBytes = tinyModelBytes();
  const modelServer = await startModelServer();
  const pullUrl = modelServer.serve('/torture/model.gguf', modelBytes);
  modelServer.behave('/torture/model.gguf', { bytesPerSecond: Math.ceil(modelBytes.length / 2) });
  const pullSource = { url: pullUrl, digest: sha256Digest(modelBytes) };
  const serviceEnv = (env: Record<string, string>): Record<string, string> => ({ ...env, LMSP_HF_ENDPOINT: modelServer.url });
  const inputs: CheckInputs = { ledger, violations, references, sealed, pullDigest: pullSource.digest };

  const dataDir = makeDataDir('torture');
  let first = roundSettings(random);
  let service = await startWithRetry({ dataDir, env: serviceEnv(first.env), args: first.args }, undefined, info);
  let kills = 0;
  let tasksInDatabase = 0;
  try {
    for (let round = 1; round <= settings.rounds; round++) {
      const phase = phaseTimer(info);
      await activityAndKill({ round, service, random, ledger, violations, info, pullSource }, settings, neighbour);
      kills += 1;
      phase('round');
      const where = `round ${round}`;
      const offline = offlineCheck(dataDir, inputs, { full: round % settings.fullScanEvery === 0, where });
      tasksInDatabase = offline.tasks;
      // What the kill interrupted: the states recovery will find (LMSP 11.3), summed over rounds.
      for (const [status, count] of Object.entries(offline.unfinished)) info.bump(`at_kill.${status}`, count);
      phase('database_checks');
      first = roundSettings(random);
      service = await startWithRetry({ env: serviceEnv(first.env), args: first.args }, service, info);
      phase('restart');
      await onlineCheckFresh(service, ledger, violations, `after ${where}`);
      phase('api_checks');
      if (round % 10 === 0 || round === settings.rounds) {
        const broken = Object.values(violations.counts()).reduce((sum, count) => sum + count, 0);
        log(`round ${round}/${settings.rounds}: ${ledger.acknowledged.size} acknowledged, ${tasksInDatabase} tasks, ${broken} violations, ${Math.round((Date.now() - started) / 1000)} s; next: ${first.label}`);
      }
    }
    // The end: no delays, room to work, and every task must reach a final state.
    await killAndReap(service, info);
    service = await startWithRetry({ env: serviceEnv({}), args: ['--parallel', '3'] }, service, info);
    await onlineCheckFresh(service, ledger, violations, 'end');
    if (!(await drain(service, settings.finalTimeoutMs))) log('some tasks did not finish in time');
    tasksInDatabase = await finalApiCheck(service, inputs);
    checkKeys(ledger, violations, info);
    await killAndReap(service, info);
    offlineCheck(dataDir, inputs, { full: true, where: 'end (database)' });
    leftoverPartials(dataDir, violations);
    recoveryCoverage(dataDir, info);
  } catch (error) {
    log(`torture stopped by an error; data directory kept: ${dataDir}`);
    throw error;
  } finally {
    await service.kill();
    await modelServer.close();
  }
  const counts = violations.counts();
  const clean = Object.values(counts).every((count) => count === 0);
  if (clean && !options.keepDataDir) rmSync(dataDir, { recursive: true, force: true });
  else log(`data directory kept: ${dataDir}`);
  return {
    rounds: settings.rounds,
    kills,
    tasksCreated: ledger.acknowledged.size,
    tasksInDatabase,
    elapsedMs: Date.now() - started,
    seed,
    counts,
    info: info.toObject(),
    examples: violations.examples(),
    dataDir,
    health: neighbour ? { p50: neighbour.percentile(50), p99: neighbour.percentile(99), samples: neighbour.healthMs.length } : null,
  };
}
