/** `lmsp config`: settings stored in the database (precedence: flag > LMSP_* > stored > default). */
import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describeConfig, findOption, OPTIONS, resolveConfig, STORED_CONFIG_PREFIX, type OptionDefinition } from '../../config.js';
import { DATABASE_FILE } from '../../store/index.js';
import {
  action, CliError, dataDirOf, EXIT_USAGE, openStore, printJson, runningService, storedSettings, table, withCommonOptions, type CommonOptions, type StoredSettings,
} from '../context.js';

function optionNamed(name: string): OptionDefinition {
  const option = findOption(name);
  if (!option) throw new CliError(`unknown setting '${name}'; settings are ${OPTIONS.map((o) => o.flag.slice(2)).join(', ')}`, EXIT_USAGE);
  return option;
}

/** The settings stored in a data directory: none before its first start, when it has no database yet. */
function readStoredSettings(options: CommonOptions): StoredSettings {
  if (!existsSync(join(dataDirOf(options), DATABASE_FILE))) return {};
  const store = openStore(options);
  try {
    return storedSettings(store);
  } finally {
    store.db.sqlite.close();
  }
}

type SettingRow = {
  setting: string;
  value: unknown;
  /** Where the value comes from: its `LMSP_*` variable, `stored` or `default`. */
  source: string;
  /** The value the running service uses, flags included; only while one runs. */
  running?: unknown;
};

/**
 * The effective value of each setting for a service started here without flags, where it comes
 * from, and, while a service runs, the value it runs with (it may have been given flags).
 */
async function settingRows(options: CommonOptions, stored: StoredSettings = readStoredSettings(options)): Promise<SettingRow[]> {
  const effective = describeConfig(resolveConfig({ flags: {}, dataDirFlag: options.dataDir, stored }));
  const running = (await runningService(options))?.settings;
  return OPTIONS.map((option) => {
    const name = option.flag.slice(2);
    const key = name.replace(/-/g, '_');
    const source = process.env[option.env] ? option.env : stored[option.key] !== undefined ? 'stored' : 'default';
    return { setting: name, value: effective[key] ?? option.defaultText, source, ...(running ? { running: running[key] ?? null } : {}) };
  });
}

function rowOf(rows: SettingRow[], option: OptionDefinition): SettingRow {
  return rows.find((row) => row.setting === option.flag.slice(2))!;
}

export function registerConfig(program: Command): void {
  // The options every command takes parse here too, so `lmsp config --data-dir D` without a
  // subcommand is told what it lacks, not that --data-dir is unknown.
  const config = withCommonOptions(program.command('config').description('settings stored in the data directory (used when no flag or LMSP_* variable sets them)'));

  withCommonOptions(config.command('ls').description('effective settings and where each comes from'))
    .action(action(async (options: CommonOptions) => {
      const rows = await settingRows(options);
      if (options.json) printJson(rows);
      else process.stdout.write(`${table(rows, ['setting', 'value', 'source', ...(rows[0]?.running !== undefined ? ['running'] : [])])}\n`);
    }));

  // As a row of `config ls`: the effective value, typed as there, and where it comes from.
  withCommonOptions(config.command('get <setting>').description('one setting: its effective value and where it comes from'))
    .action(action(async (name: string, options: CommonOptions) => {
      const row = rowOf(await settingRows(options), optionNamed(name));
      if (options.json) printJson(row);
      else process.stdout.write(`${String(row.value)} (${row.source})${row.running !== undefined ? `; the running service uses ${String(row.running)}` : ''}\n`);
    }));

  withCommonOptions(config.command('set <setting> <value>').description('store a setting (takes effect at the next start)'))
    .action(action(async (name: string, value: string, options: CommonOptions) => {
      const option = optionNamed(name);
      try {
        option.parse(value);
      } catch (error) {
        throw new CliError(`${option.flag.slice(2)}: ${(error as Error).message}, got '${value}'`, EXIT_USAGE);
      }
      const stored = option.storedAs?.(value) ?? value;
      const store = openStore(options, true);
      store.db.transaction(() => store.config.set(STORED_CONFIG_PREFIX + option.key, stored));
      store.db.sqlite.close();
      const row = rowOf(await settingRows(options, { ...readStoredSettings(options), [option.key]: stored }), option);
      if (options.json) printJson(row);
      else process.stdout.write(`${option.flag.slice(2)} = ${stored} (restart the service to apply)\n`);
    }));

  withCommonOptions(config.command('unset <setting>').description('forget a stored setting'))
    .action(action((name: string, options: CommonOptions) => {
      const option = optionNamed(name);
      const store = openStore(options);
      const removed = store.db.transaction(() => store.config.delete(STORED_CONFIG_PREFIX + option.key));
      store.db.sqlite.close();
      if (options.json) printJson({ setting: option.flag.slice(2), removed });
      else process.stdout.write(removed ? `${option.flag.slice(2)} unset\n` : `${option.flag.slice(2)} was not stored\n`);
    }));
}
