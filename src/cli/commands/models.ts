/** `lmsp models add|ls|rm|verify`: the model registry (LMSP section 5). */
import { resolve } from 'node:path';
import { statSync } from 'node:fs';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import type { ModelObject } from '../../api/types.js';
import { resolveConfig, STORED_CONFIG_PREFIX, type OptionDefinition } from '../../config.js';
import { ModelRegistry, toModelObject } from '../../models/registry.js';
import type { HashProgress } from '../../models/hashing.js';
import {
  action, openStore, operatorClient, printJson, runningService, table, withCommonOptions, type CommonOptions,
} from '../context.js';

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

function registryFor(options: CommonOptions): { registry: ModelRegistry; close: () => Promise<void> } {
  const store = openStore(options);
  const stored = store.config.withPrefix(STORED_CONFIG_PREFIX) as Partial<Record<OptionDefinition['key'], string>>;
  const config = resolveConfig({ dataDirFlag: options.dataDir, stored });
  return { registry: new ModelRegistry(store, config.modelsDir), close: () => store.close() };
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

export function registerModels(program: Command): void {
  const models = program.command('models').description('the model registry');

  withCommonOptions(models.command('add <path>').description('register a GGUF file (hashes it; the file stays where it is)')
    .option('--id <id>', 'model id (default: from the file name)'))
    .action(action(async (path: string, options: CommonOptions & { id?: string }) => {
      const { registry, close } = registryFor(options);
      const absolute = resolve(path);
      let size = 0;
      try {
        size = statSync(absolute).size;
      } catch {
        // register() reports the missing file
      }
      const progress = hashingProgress('hashing', size, options.json === true);
      try {
        const model = await registry.register({ path: absolute, id: options.id }, { restrictToModelsDir: false, onProgress: progress.onProgress });
        progress.stop();
        const object = toModelObject(model, false, true);
        if (options.json) printJson(object);
        else process.stdout.write(`registered ${model.id}: ${model.digest} (${model.architecture}, ${model.quantization}, context ${model.contextLength})\n`);
      } finally {
        progress.stop();
        await close();
      }
    }));

  withCommonOptions(models.command('ls').description('list registered models'))
    .action(action(async (options: CommonOptions) => {
      if (runningService(options)) return printModels(await operatorClient(options).listModels(), options.json);
      const { registry, close } = registryFor(options);
      const list = registry.list().map((model) => toModelObject(model, false, true));
      await close();
      printModels(list, options.json);
    }));

  withCommonOptions(models.command('rm <id>').description('unregister a model (the file stays)'))
    .action(action(async (id: string, options: CommonOptions) => {
      if (runningService(options)) await operatorClient(options).deleteModel(id);
      else {
        const { registry, close } = registryFor(options);
        try {
          await registry.remove(id);
        } finally {
          await close();
        }
      }
      if (options.json) printJson({ id, object: 'model', deleted: true });
      else process.stdout.write(`removed ${id}\n`);
    }));

  withCommonOptions(models.command('verify <id>').description('re-hash the file and compare it with its recorded digest'))
    .action(action(async (id: string, options: CommonOptions) => {
      const { registry, close } = registryFor(options);
      let model;
      try {
        const existing = registry.get(id);
        const progress = hashingProgress('verifying', existing?.sizeBytes ?? 0, options.json === true);
        model = await registry.verify(id, progress.onProgress);
        progress.stop();
      } finally {
        await close();
      }
      const object = toModelObject(model, false, true);
      if (options.json) printJson(object);
      else process.stdout.write(`${model.id}: ${model.status}${model.status === 'ready' ? ` (${model.digest})` : ''}\n`);
      if (model.status !== 'ready') process.exitCode = 1;
    }));
}
