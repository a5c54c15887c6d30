/**
 * `lmsp models add|ls|rm|verify`: the model registry (LMSP section 5). With the service running,
 * each goes through its API; with it stopped, through the same use cases on the data directory.
 * `add` of a file outside the models directory, which the API refuses to any client, is
 * registered directly by the same use case even while the service runs: the operator may name
 * any file of this machine.
 */
import { isAbsolute, relative, sep } from 'node:path';
import { realpathSync } from 'node:fs';
import { realpath } from 'node:fs/promises';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import type { ModelObject } from '../../api/types.js';
import type { HashProgress } from '../../models/hashing.js';
import { modelIdFromPath } from '../../models/registry.js';
import { listModels, registerModel, removeModel, verifyModel, type ModelOutcome } from '../../tasks/models.js';
import {
  action, fileSize, openOffline, printJson, type OfflineCore, serviceClient, table, withCommonOptions, type CommonOptions,
} from '../context.js';
import { registerModelPull } from './pull.js';

/** A progress bar on stderr while a file is hashed (none when not a terminal or with --json). */
function hashingProgress(label: string, total: number, quiet: boolean): { onProgress: HashProgress | undefined; stop: () => void } {
  if (quiet || !process.stderr.isTTY || total < 8 * 1024 * 1024) return { onProgress: undefined, stop: () => {} };
  const bar = new cliProgress.SingleBar({
    format: `${label} {bar} {percentage}% | {done}/{size} MiB | {eta_formatted}`,
    stream: process.stderr,
    hideCursor: true,
  }, cliProgress.Presets.shades_classic);
  const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);
  bar.start(total, 0, { done: '0', size: mib(total) });
  return {
    onProgress: (bytes) => bar.update(bytes, { done: mib(bytes), size: mib(total) }),
    stop: () => bar.stop(),
  };
}

function printModels(models: ModelObject[], json: boolean | undefined): void {
  if (json) return printJson({ object: 'list', data: models });
  const rows = models.map((model) => ({
    id: model.id,
    status: model.status,
    loaded: model.loaded ? 'yes' : 'no',
    size: `${(model.size_bytes / 1024 / 1024).toFixed(1)} MiB`,
    arch: model.architecture,
    context: model.context_length,
    quant: model.quantization,
    digest: model.digest.slice(0, 19),
  }));
  process.stdout.write(`${table(rows, ['id', 'status', 'loaded', 'size', 'arch', 'context', 'quant', 'digest'])}\n`);
}

function isInside(folder: string, path: string): boolean {
  try {
    const inside = relative(realpathSync(folder), realpathSync(path));
    return inside !== '' && !inside.startsWith('..') && !isAbsolute(inside);
  } catch {
    return false;
  }
}

/**
 * The registry of a data directory whose service is not running, with the built-in model
 * registered as a first `lmsp serve` would (LMSP 5: present on every fresh install), so a data
 * directory that only `lmsp pair` has touched lists it too.
 */
async function openRegistry(options: CommonOptions): Promise<OfflineCore> {
  const offline = openOffline(options);
  try {
    await offline.registry.ensureBuiltin();
  } catch (error) {
    await offline.close();
    throw error;
  }
  return offline;
}

function modelOf(outcome: ModelOutcome): ModelObject {
  return 'replay' in outcome ? outcome.replay.body as ModelObject : outcome.model;
}

export function registerModels(program: Command): void {
  // The options every command takes parse here too, so `lmsp models --data-dir D` without a
  // subcommand is told what it lacks, not that --data-dir is unknown.
  const models = withCommonOptions(program.command('models').description('the model registry'));

  withCommonOptions(models.command('add <path>').description('register a GGUF file (hashes it; the file stays where it is)')
    .option('--id <id>', 'model id (default: from the file name)'))
    .action(action(async (path: string, options: CommonOptions & { id?: string }) => {
      // Read as the kernel reads it (a `..` after a link, `file.gguf/`), then named by the name
      // given, as the API does; a path that leads nowhere is reported as given.
      const given = isAbsolute(path) ? path : `${process.cwd()}${sep}${path}`;
      const absolute = await realpath(given).catch(() => given);
      const id = options.id ?? modelIdFromPath(path);
      const client = await serviceClient(options);
      const local = await openRegistry(options);
      const progress = hashingProgress('hashing', fileSize(absolute), options.json === true);
      let model: ModelObject;
      try {
        model = client && isInside(local.config.modelsDir, absolute)
          ? await client.registerModel(absolute, id)
          : modelOf(await registerModel(local, { path: absolute, id }, { restrictToModelsDir: false, onProgress: progress.onProgress }, null));
      } finally {
        progress.stop();
        await local.close();
      }
      if (options.json) printJson(model);
      else process.stdout.write(`registered ${model.id}: ${model.digest} (${model.architecture}, ${model.quantization}, context ${model.context_length})\n`);
    }));

  registerModelPull(models);

  withCommonOptions(models.command('ls').description('list registered models'))
    .action(action(async (options: CommonOptions) => {
      const client = await serviceClient(options);
      if (client) return printModels(await client.listModels(), options.json);
      const offline = await openRegistry(options);
      try {
        printModels(listModels(offline, true), options.json);
      } finally {
        await offline.close();
      }
    }));

  withCommonOptions(models.command('rm <id>').description('unregister a model (the file stays)'))
    .action(action(async (id: string, options: CommonOptions) => {
      const client = await serviceClient(options);
      if (client) await client.deleteModel(id);
      else {
        const offline = await openRegistry(options);
        try {
          await removeModel(offline, id);
        } finally {
          await offline.close();
        }
      }
      if (options.json) printJson({ id, object: 'model', deleted: true });
      else process.stdout.write(`removed ${id}\n`);
    }));

  withCommonOptions(models.command('verify <id>').description('re-hash the file and compare it with its recorded digest'))
    .action(action(async (id: string, options: CommonOptions) => {
      const client = await serviceClient(options);
      let model: ModelObject;
      if (client) model = await client.verifyModel(id);
      else {
        const offline = await openRegistry(options);
        const progress = hashingProgress('verifying', offline.registry.get(id)?.sizeBytes ?? 0, options.json === true);
        try {
          model = modelOf(await verifyModel(offline, id, null, progress.onProgress));
        } finally {
          progress.stop();
          await offline.close();
        }
      }
      if (options.json) printJson(model);
      else process.stdout.write(`${model.id}: ${model.status}${model.status === 'ready' ? ` (${model.digest})` : ''}\n`);
      // A check that did not pass is a failure: said on stderr, exit 1. With --json the model is
      // still the document (its status says what was found), as `lmsp run --json` prints its response.
      if (model.status !== 'ready') {
        const found = model.status === 'missing' ? 'its file is missing' : `its file no longer has the digest it was registered with (${model.digest})`;
        process.stderr.write(`lmsp: model ${model.id}: ${found}\n`);
        process.exitCode = 1;
      }
    }));
}
