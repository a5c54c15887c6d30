/**
 * The use cases of model pulls (LMSP 5.1): create one (a durable `model_pull` task, 202), and run
 * one to its end. The service's pull workers (pull-worker.ts) and the CLI working on a stopped
 * service's data directory run pulls with the same `runPull`.
 */
import { lstatSync } from 'node:fs';
import { lstat, realpath, rm, stat } from 'node:fs/promises';
import { toTaskObject } from '../api/views.js';
import type { Client } from '../domain/clients.js';
import { ServiceError, invalidRequest, isStorageUnavailable } from '../domain/errors.js';
import { fileStampOf, MODEL_ID_PATTERN, type GgufFacts, type Model } from '../domain/models.js';
import type { ModelPull } from '../domain/pulls.js';
import { RESTART_POLICIES, type RestartPolicy, type Task } from '../domain/tasks.js';
import { DownloadAbortedError, DownloadError } from '../models/download-errors.js';
import { downloadModel, modelPathOf, partialPathOf, type DownloadResult } from '../models/download.js';
import { readGgufFacts } from '../models/gguf.js';
import { hashPrefix, partialSize, removePartial } from '../models/partial-file.js';
import { modelIdFromSource, parseExpectedDigest, parsePullSource, type PullSettings, type PullSource } from '../models/pull-source.js';
import type { IdempotencyKey, StoredAnswer } from '../store/index.js';
import { nowSeconds, sleep } from '../time.js';
import type { TaskCore } from './core.js';
import { assertRoomForTask, type TaskLimits } from './limits.js';
import type { PullProgressReport } from './pull-kind.js';
import { withoutPaths } from './scheduler.js';
import { newTask } from './new-task.js';

export interface CreatePullBody {
  source: string;
  id?: string | null;
  digest?: string | null;
  on_restart?: RestartPolicy | null;
}

export type PullDeps = Pick<TaskCore, 'store' | 'machine' | 'registry'>;

export type CreatePullOutcome = { replay: StoredAnswer } | { task: Task };

export function taskLocation(taskId: string): string {
  return `/v1/tasks/${taskId}`;
}

/**
 * An id an unfinished pull will register is taken already: a registration, like a second pull,
 * gets 409 `model_exists` now rather than failing the pull once it has downloaded everything.
 */
export function assertNotBeingPulled(deps: Pick<PullDeps, 'store'>, id: string): void {
  if (deps.store.pulls.countUnfinishedForModel(id) > 0) throw modelExists(id, 'is being pulled by an unfinished task');
}

function modelExists(id: string, why: string): ServiceError {
  return new ServiceError('model_exists', `A model with id '${id}' ${why}; choose another id (\`id\` in the request, \`--id\` on the command line).`,
    { param: 'id', headers: { 'x-should-retry': 'false' } });
}

/**
 * LMSP 5.1: a registered id, an unfinished pull of the same id, or a file of that name already in
 * the models directory (a pull never overwrites a file) all get 409 `model_exists`.
 */
function assertIdFree(deps: PullDeps, id: string): void {
  if (deps.registry.get(id)) throw modelExists(id, 'is already registered');
  assertNotBeingPulled(deps, id);
  // lstat: a link counts as there, even one that leads nowhere (the download would not replace it).
  if (lstatSync(modelPathOf(deps.registry.modelsDir, id), { throwIfNoEntry: false })) throw modelExists(id, `has no record, but something named ${id}.gguf is in the models directory already (a file to register with \`lmsp models add\`, or to remove)`);
}

interface PreparedPull {
  source: PullSource;
  id: string;
  digest: string | null;
  onRestart: RestartPolicy;
}

/** Checks a pull request; writes nothing. */
export function preparePull(deps: PullDeps, body: CreatePullBody, settings: PullSettings): PreparedPull {
  if (body === null || typeof body !== 'object') throw invalidRequest(null, 'the body must be a JSON object');
  const source = parsePullSource(body.source, settings);
  if (body.id !== undefined && body.id !== null && (typeof body.id !== 'string' || !MODEL_ID_PATTERN.test(body.id))) {
    throw invalidRequest('id', 'model ids are 1-128 characters of a-z, 0-9, ".", "_", ":" and "-", starting with a letter or digit');
  }
  const digest = body.digest === undefined || body.digest === null ? null : parseExpectedDigest(body.digest);
  const onRestart = body.on_restart ?? 'resume';
  if (!(RESTART_POLICIES as readonly string[]).includes(onRestart)) throw invalidRequest('on_restart', "on_restart must be 'fail', 'retry' or 'resume'");
  const id = body.id ?? modelIdFromSource(source);
  assertIdFree(deps, id);
  return { source, id, digest, onRestart };
}

function newPullTask(client: Client, modelId: string, onRestart: RestartPolicy): Task {
  return newTask({ kind: 'model_pull', clientId: client.id, model: modelId, onRestart, createdAt: nowSeconds() });
}

/**
 * LMSP 5.1 and 11.2: the pull's task, its record, `model.pull.created` and the idempotency key in
 * one transaction, committed before the 202.
 */
export async function createPull(deps: PullDeps, client: Client, body: CreatePullBody, settings: PullSettings,
  key: IdempotencyKey | null, limits: TaskLimits): Promise<CreatePullOutcome> {
  const outcome = await deps.store.idempotent(key, {
    actor: client.id,
    prepare: () => preparePull(deps, body, settings),
    effect: (context, prepared) => {
      assertIdFree(deps, prepared.id); // again: another request may have taken it meanwhile
      assertRoomForTask(deps, client, limits);
      const task = newPullTask(client, prepared.id, prepared.onRestart);
      const pull: ModelPull = {
        taskId: task.id, modelId: prepared.id, source: body.source, url: prepared.source.url, modelsDir: deps.registry.modelsDir,
        expectedDigest: prepared.digest, resume: null, digest: null, sizeBytes: null,
      };
      deps.store.pulls.insert(pull);
      const created = deps.machine.create(context, task, { pull, model: null });
      const answer: StoredAnswer = { status: 202, headers: { location: taskLocation(created.id) }, body: toTaskObject(created) };
      return { result: created, record: { answer, taskId: created.id } };
    },
  });
  return 'replay' in outcome ? outcome : { task: outcome.result };
}

export interface RunPullOptions {
  settings: PullSettings;
  /** Aborted with reason `PULL_CANCELLED` on a cancel; any other reason (the service stops) leaves the task as it is on disk. */
  signal: AbortSignal;
  /** Each report as it is logged (the CLI's progress bar). */
  onProgress?: (report: PullProgressReport & { bytesPerSecond: number }) => void;
  log?: (level: 'info' | 'warn' | 'error', message: string, fields: object) => void;
  /** Waits between attempts after a failure that a later attempt may get past (connection lost, 5xx). */
  retryDelaysMs?: readonly number[];
}

export const PULL_CANCELLED = 'cancelled';

/** A dropped connection or a 5xx is tried again from the bytes on disk, after these waits (failures in a row). */
const RETRY_DELAYS_MS = [300, 1000, 3000];
/**
 * A server's `Retry-After` (with 429 or 503, say) lengthens a wait up to this: a pull holds one of
 * the few pull slots while it waits, and the wait is asked by a server that is not trusted.
 */
export const MAX_RETRY_AFTER_MS = 60_000;
/** An attempt that added at least this to the file made progress: the retries start counting again. */
const PROGRESS_BYTES = 64 * 1024;
/** However much each makes, a pull makes at most this many attempts (a server that drops every few bytes ends). */
const MAX_ATTEMPTS = 1000;

/** The source to fetch: the URL resolved when the pull was created (a changed endpoint does not move a pull). */
function sourceOf(pull: ModelPull): PullSource {
  return { kind: pull.source.startsWith('hf:') ? 'hf' : 'url', url: pull.url, fileName: `${pull.modelId}.gguf`, hf: null };
}

/**
 * The model file an earlier run of this pull moved into place before the process died, and before
 * the model was recorded: the file with the digest and size that run recorded just before the
 * move (`beforePublish`), read without following a link. Null when there is none.
 */
async function movedIntoPlaceBefore(pull: ModelPull, signal: AbortSignal): Promise<{ result: DownloadResult; facts: GgufFacts } | null> {
  if (pull.digest === null || pull.sizeBytes === null) return null;
  const path = modelPathOf(pull.modelsDir, pull.modelId);
  const info = await lstat(path).catch(() => null);
  if (!info?.isFile() || info.size !== pull.sizeBytes) return null;
  const hashed = await hashPrefix(path, info.size, signal).catch(() => null);
  if (!hashed || `sha256:${hashed.hash.digest('hex')}` !== pull.digest) return null;
  const facts = await readGgufFacts(path).catch(() => null);
  if (!facts) return null;
  return { result: { path, sizeBytes: info.size, digest: pull.digest, resumedFromBytes: info.size, transferredBytes: 0 }, facts };
}

/**
 * Runs one pull task until it ends, or until the signal stops it: queued -> running, the download
 * (continuing from the bytes on disk when the task was resumed at startup), then the model and
 * `model.pull.completed` in one transaction. Answers the task as it was left.
 */
export async function runPull(deps: PullDeps, taskId: string, options: RunPullOptions): Promise<Task | null> {
  const { store, machine } = deps;
  const log = options.log ?? (() => {});
  let task = store.tasks.get(taskId);
  const pull = store.pulls.get(taskId);
  if (!task || !pull) return task;
  const partial = partialPathOf(pull.modelsDir, pull.modelId);
  // LMSP 7.5: a crash between the move of the whole file into place and the model's record left
  // the file where a new download may not overwrite it.
  const moved = task.status === 'queued' || task.status === 'running' ? await movedIntoPlaceBefore(pull, options.signal) : null;
  if (task.status === 'queued') {
    // A new attempt starts from nothing: whatever an earlier attempt (a retry) left goes. What
    // cannot be removed (a folder at the name) fails the download when it opens the file.
    await removePartial(partial).catch(() => undefined);
    if (moved) await rm(moved.result.path, { force: true }).catch(() => undefined);
    const started = await store.db.write((context) => {
      store.pulls.setResumeState(taskId, null);
      return machine.startRunning(context, taskId);
    });
    if (!started) return store.tasks.get(taskId);
    task = started;
  } else if (task.status !== 'running') {
    return task;
  } else if (moved) {
    // Resumed: the download had ended; only the model's record is left to write.
    log('info', 'resuming pull whose file is in place', { task: taskId });
    await removePartial(partial).catch(() => undefined); // a second link to the same file, if the crash came between link and unlink
    return finishPull(deps, task, pull, moved.result, moved.facts);
  } else {
    log('info', 'resuming pull', { task: taskId, bytes_on_disk: (await stat(partial).catch(() => null))?.size ?? 0 });
  }

  // What the validator learned about the whole file, before it was moved into place.
  const validated: { facts: GgufFacts | null } = { facts: null };
  let progressWrite: Promise<unknown> | null = null;
  let reported = false;
  const report = (progress: PullProgressReport & { bytesPerSecond: number }) => {
    reported = true;
    options.onProgress?.(progress);
    // LMSP 5.1: at most one progress event a second (the download reports no more often); one write at a time.
    progressWrite ??= store.db.write((context) => machine.recordProgress(context, taskId, progress))
      .catch(() => undefined).finally(() => (progressWrite = null));
  };
  const delays = options.retryDelaysMs ?? RETRY_DELAYS_MS;
  let result: DownloadResult | null = null;
  let failure: unknown = null;
  // Retries count failures in a row: an attempt that added bytes to the file made progress, and
  // a long download over a connection that drops now and then goes on.
  let retriesInARow = 0;
  for (let attempt = 0; ; attempt += 1) {
    const onDiskBefore = await partialSize(partial).catch(() => 0);
    try {
      result = await downloadModel({
        source: sourceOf(pull), settings: options.settings, modelsDir: pull.modelsDir, id: pull.modelId,
        expectedDigest: pull.expectedDigest, resume: store.pulls.get(taskId)?.resume ?? null, signal: options.signal,
        onResumeState: (state) => store.db.write(() => store.pulls.setResumeState(taskId, state)),
        beforePublish: ({ digest, sizeBytes }) => store.db.write(() => store.pulls.setResult(taskId, digest, sizeBytes)),
        onProgress: ({ downloadedBytes, totalBytes, bytesPerSecond }) => report({ downloadedBytes, totalBytes, bytesPerSecond }),
        validate: async (path) => {
          validated.facts = await readGgufFacts(path);
        },
      });
      break;
    } catch (error) {
      if (error instanceof DownloadError && error.resumable) {
        const added = (await partialSize(partial).catch(() => 0)) - onDiskBefore;
        retriesInARow = added >= PROGRESS_BYTES ? 0 : retriesInARow;
      }
      if (error instanceof DownloadError && error.resumable && retriesInARow < delays.length && attempt < MAX_ATTEMPTS && !options.signal.aborted) {
        const wait = Math.max(delays[retriesInARow]!, Math.min(error.retryAfterMs ?? 0, MAX_RETRY_AFTER_MS));
        retriesInARow += 1;
        log('warn', 'pull interrupted; continuing from the bytes on disk', { task: taskId, reason: error.reason, error: error.message, wait_ms: wait });
        await sleep(wait, options.signal);
        if (!options.signal.aborted) continue;
        failure = new DownloadAbortedError(0, options.signal.reason);
      } else {
        failure = error;
      }
      break;
    }
  }
  await progressWrite;
  if (result && validated.facts) {
    // LMSP 5.1: a pull that fetched bytes reports them at least once. An attempt cut short before
    // its first report, then finished by an answer with no body (416: the file on disk is whole),
    // reported nothing: the whole file is reported now.
    if (!reported) report({ downloadedBytes: result.sizeBytes, totalBytes: result.sizeBytes, bytesPerSecond: 0 });
    await progressWrite;
    return finishPull(deps, task, pull, result, validated.facts);
  }
  return settlePullFailure(deps, taskId, partial, failure, options.signal, log);
}

/** The model, the pull's result and `model.pull.completed` in one transaction; a cancel accepted first wins (LMSP 7.4). */
async function finishPull(deps: PullDeps, task: Task, pull: ModelPull, result: DownloadResult, facts: GgufFacts): Promise<Task | null> {
  const { store, machine, registry } = deps;
  const info = await stat(result.path, { bigint: true });
  const now = nowSeconds();
  // The size hashed, beside the stamp of the file as it stands: a change since is hashed again at
  // its load. Recorded by its real path, as every registered file is.
  const model: Model = {
    id: pull.modelId, path: await realpath(result.path), digest: result.digest, ...fileStampOf(info), sizeBytes: result.sizeBytes,
    status: 'ready', builtin: false, createdAt: now, verifiedAt: now, ...facts,
  };
  let outcome: { task: Task | null; keepFile: boolean };
  try {
    outcome = await store.db.write((context) => {
      const current = store.tasks.get(task.id);
      if (!current || current.status !== 'running') {
        return { task: current?.status === 'cancelling' ? machine.finishCancel(context, task.id) : current, keepFile: false };
      }
      if (registry.get(model.id)) {
        return { task: machine.fail(context, task.id, 'model_exists', `a model with id '${model.id}' was registered while the pull ran`), keepFile: false };
      }
      registry.insert(model);
      store.pulls.setResult(task.id, result.digest, result.sizeBytes);
      return { task: machine.complete(context, task.id, 'stop'), keepFile: true };
    });
  } catch (error) {
    // Nothing was recorded: the file goes, and the task (still running on disk) starts over when picked up again.
    await rm(result.path, { force: true });
    throw error;
  }
  if (!outcome.keepFile) await rm(result.path, { force: true });
  return outcome.task;
}

/**
 * Ends a pull that failed with something no other try would fix (neither the database nor the
 * download: a fault of its own files): cancelled if a cancel was asked, else failed.
 */
export function endFaultyPull(deps: PullDeps, taskId: string, error: unknown, log: NonNullable<RunPullOptions['log']>): Promise<Task | null> {
  const pull = deps.store.pulls.get(taskId);
  if (!pull) return Promise.resolve(deps.store.tasks.get(taskId));
  return settlePullFailure(deps, taskId, partialPathOf(pull.modelsDir, pull.modelId), error, new AbortController().signal, log);
}

async function settlePullFailure(deps: PullDeps, taskId: string, partial: string, error: unknown, signal: AbortSignal,
  log: NonNullable<RunPullOptions['log']>): Promise<Task | null> {
  const { store, machine } = deps;
  const current = store.tasks.get(taskId);
  if (current?.status === 'cancelling') {
    // LMSP 5.1: a cancel removes the partial file (the kind's `finalized` does, with the status).
    return store.db.write((context) => machine.finishCancel(context, taskId));
  }
  if (signal.aborted && signal.reason !== PULL_CANCELLED) return current; // the service stops: resumed at the next start
  if (isStorageUnavailable(error)) throw error;
  const code = error instanceof DownloadError ? error.code : 'download_failed';
  const message = withoutPaths(error instanceof Error ? error.message : String(error));
  log('warn', 'pull failed', { task: taskId, code, error: error instanceof Error ? error.message : String(error) });
  // LMSP 5.1: a failed pull leaves no partial file.
  await removePartial(partial).catch(() => undefined);
  return store.db.write((context) => machine.fail(context, taskId, code, message));
}
