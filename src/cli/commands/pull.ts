/**
 * `lmsp models pull SOURCE [--id ID] [--digest sha256:HEX]` (LMSP 5.1). With the service running,
 * the pull is a task of the service: the command starts it through the API and follows its events
 * with a progress bar. With the service stopped, the command takes the data directory's lock and
 * runs the same task through the task core itself. Either way Ctrl-C cancels the pull (a second
 * one leaves at once), and `--json` prints the registered model.
 */
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import type { LmspClient } from '../../api/client.js';
import type { ModelObject, TaskEvent, TaskObject } from '../../api/types.js';
import { toModelObject, toTaskObject } from '../../api/views.js';
import { ensureOperatorToken } from '../../auth/clients.js';
import { parseExpectedDigest, pullSettingsFromEnvironment } from '../../models/pull-source.js';
import { createPull, PULL_CANCELLED, runPull } from '../../tasks/pulls.js';
import { action, CliError, dataDirOf, EXIT_INTERRUPTED, EXIT_USAGE, lockDataDirForThisProcess, openOffline, operatorClient, printJson, serviceClient, withCommonOptions, type CommonOptions } from '../context.js';
import { followTask } from '../follow.js';

interface PullOptions extends CommonOptions {
  id?: string;
  digest?: string;
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

function formatDuration(seconds: number): string {
  const whole = Math.max(0, Math.ceil(seconds));
  if (whole < 60) return `${whole}s`;
  if (whole < 3600) return `${Math.floor(whole / 60)}m${String(whole % 60).padStart(2, '0')}s`;
  return `${Math.floor(whole / 3600)}h${String(Math.floor((whole % 3600) / 60)).padStart(2, '0')}m`;
}

/** The progress bar on stderr: bytes, rate and time left (none when not a terminal, or with --json). */
class PullBar {
  private bar: cliProgress.SingleBar | null = null;
  private last: { bytes: number; at: number } | null = null;
  private rate = 0;

  constructor(private readonly label: string, private readonly quiet: boolean) {}

  update(downloaded: number, total: number | null): void {
    if (this.quiet || !process.stderr.isTTY) return;
    const now = performance.now();
    if (this.last && now > this.last.at && downloaded >= this.last.bytes) {
      const current = ((downloaded - this.last.bytes) * 1000) / (now - this.last.at);
      this.rate = this.rate === 0 ? current : 0.7 * this.rate + 0.3 * current;
    }
    this.last = { bytes: downloaded, at: now };
    const left = total !== null && this.rate > 0 ? formatDuration((total - downloaded) / this.rate) : '-';
    const payload = { done: formatBytes(downloaded), size: total === null ? '?' : formatBytes(total), rate: `${formatBytes(Math.round(this.rate))}/s`, left };
    if (!this.bar) {
      this.bar = new cliProgress.SingleBar({
        format: `${this.label} {bar} {percentage}% | {done}/{size} | {rate} | {left} left`,
        stream: process.stderr,
        hideCursor: true,
      }, cliProgress.Presets.shades_classic);
      this.bar.start(total ?? Math.max(downloaded, 1), downloaded, payload);
    }
    if (total !== null) this.bar.setTotal(total);
    this.bar.update(downloaded, payload);
  }

  /** The whole file is there: the bar shows all of it, whatever the last progress event said (at most one a second). */
  complete(sizeBytes: number): void {
    if (this.bar) this.update(sizeBytes, sizeBytes);
    this.stop();
  }

  stop(): void {
    this.bar?.stop();
    this.bar = null;
  }
}

function report(model: ModelObject, json: boolean | undefined): void {
  if (json) printJson(model);
  else process.stdout.write(`pulled ${model.id}: ${model.digest} (${formatBytes(model.size_bytes)}, ${model.architecture}, ${model.quantization}, context ${model.context_length})\n`);
}

/**
 * What a finished pull means for the command: the model, or an error and an exit status. A pull
 * this command cancelled (Ctrl-C) exits 130; one cancelled by someone else (`lmsp tasks cancel`,
 * the dashboard) is a failure of the command, 1, as for `lmsp run`.
 */
function outcomeOf(task: TaskObject, model: ModelObject | null, cancelledHere: boolean): ModelObject {
  if (task.status === 'completed' && model) return model;
  if (task.status === 'cancelled') {
    if (cancelledHere) throw new CliError(`the pull ${task.id} was cancelled`, EXIT_INTERRUPTED, 'task_cancelled');
    throw new CliError(`the pull ${task.id} was cancelled before it finished`, 1, 'task_cancelled');
  }
  const code = task.error?.code ?? 'task_failed';
  throw new CliError(`the pull ${task.id} failed: ${task.error?.message ?? 'unknown error'} (${code})`, 1, code);
}

/**
 * Ctrl-C: the first cancels the pull, a second leaves at once. Answers whether it was pressed,
 * and the function that stops listening.
 */
function onInterrupt(cancel: () => Promise<void>): { interrupted: () => boolean; stop: () => void } {
  let interrupted = false;
  const listener = () => {
    if (interrupted) process.exit(EXIT_INTERRUPTED);
    interrupted = true;
    process.stderr.write('\ncancelling the pull (Ctrl-C again to leave at once)\n');
    cancel().catch((error: unknown) => process.stderr.write(`lmsp: cannot cancel: ${String(error)}\n`));
  };
  process.on('SIGINT', listener);
  return { interrupted: () => interrupted, stop: () => process.off('SIGINT', listener) };
}

async function pullThroughService(client: LmspClient, source: string, options: PullOptions, bar: PullBar): Promise<ModelObject> {
  const body = { source, ...(options.id ? { id: options.id } : {}), ...(options.digest ? { digest: options.digest } : {}) };
  const task = (await client.pullModel(body)).body;
  if (!options.json) process.stderr.write(`pulling ${task.model} as task ${task.id}\n`);
  const { interrupted, stop } = onInterrupt(async () => {
    // Wherever the service listens now: it may have restarted while the pull was followed.
    await (await operatorClient(options).catch(() => client)).cancelTask(task.id);
  });
  try {
    let terminal: TaskEvent | null = null;
    // Followed until its terminal event: a dropped connection (the service restarted, and the
    // pull resumes) is opened again, a stream refused for now (429) asked for again.
    const followed = await followTask(client, options, task.id, {
      after: 0,
      what: 'the pull',
      onEvent: (event) => {
        if (event.type === 'model.pull.progress' || event.type === 'model.pull.resumed') {
          bar.update(event.downloaded_bytes as number, (event.total_bytes as number | null) ?? null);
        }
        if (event.type === 'model.pull.completed') bar.complete((event.model as ModelObject).size_bytes);
        if (event.type === 'model.pull.completed' || event.type === 'model.pull.failed' || event.type === 'model.pull.cancelled') terminal = event;
      },
      onReconnect: (reason) => {
        bar.stop();
        process.stderr.write(`lmsp: ${reason}; following the pull ${task.id} again\n`);
      },
    });
    const finished = await followed.client.getTask(task.id);
    return outcomeOf(finished, ((terminal as TaskEvent | null)?.model as ModelObject | undefined) ?? null, interrupted());
  } finally {
    // Before whatever follows is written, an error included.
    bar.stop();
    stop();
  }
}

async function pullOffline(source: string, options: PullOptions, bar: PullBar): Promise<ModelObject> {
  const lock = lockDataDirForThisProcess(dataDirOf(options));
  const offline = openOffline(options, true);
  try {
    const client = ensureOperatorToken(offline.store, dataDirOf(options));
    const settings = pullSettingsFromEnvironment();
    const created = await createPull(offline, client, { source, id: options.id ?? null, digest: options.digest ?? null }, settings, null,
      { maxUnfinishedTasks: offline.config.maxUnfinishedTasksPerClient });
    if ('replay' in created) throw new Error('a pull without an idempotency key is never a replay');
    const taskId = created.task.id;
    if (!options.json) process.stderr.write(`pulling ${created.task.model} as task ${taskId} (the service is not running)\n`);
    const abort = new AbortController();
    const { interrupted, stop } = onInterrupt(async () => {
      await offline.store.db.write((context) => offline.machine.cancel(context, taskId));
      abort.abort(PULL_CANCELLED);
    });
    try {
      const finished = await runPull(offline, taskId, {
        settings,
        signal: abort.signal,
        onProgress: ({ downloadedBytes, totalBytes }) => bar.update(downloadedBytes, totalBytes),
      });
      if (!finished) throw new CliError(`the pull ${taskId} is gone`, 1);
      const model = offline.registry.get(finished.model);
      if (finished.status === 'completed' && model) bar.complete(model.sizeBytes);
      else bar.stop();
      return outcomeOf(toTaskObject(finished), finished.status === 'completed' && model ? toModelObject(model, false, true) : null, interrupted());
    } finally {
      stop();
    }
  } finally {
    await offline.close();
    lock.release();
  }
}

export function registerModelPull(models: Command): void {
  withCommonOptions(models.command('pull <source>')
    .description('download a GGUF model (hf:OWNER/REPO/FILE.gguf[@REVISION] or an https:// URL) and register it')
    .option('--id <id>', 'model id (default: from the file name)')
    .option('--digest <sha256:hex>', 'the expected sha256 digest; a file with another fails the pull'))
    .action(action(async (source: string, options: PullOptions) => {
      // A value that does not parse is a usage error (exit 2), before anything is asked of a service.
      if (options.digest !== undefined) {
        try {
          parseExpectedDigest(options.digest);
        } catch (error) {
          throw new CliError(`--digest: ${(error as Error).message}`, EXIT_USAGE);
        }
      }
      const bar = new PullBar('pulling', options.json === true);
      try {
        const client = await serviceClient(options);
        const model = client ? await pullThroughService(client, source, options, bar) : await pullOffline(source, options, bar);
        report(model, options.json);
      } finally {
        bar.stop();
      }
    }));
}
