/** `lmsp serve`: run the service (LMSP section 12). */
import { mkdirSync } from 'node:fs';
import type { Command } from 'commander';
import { OPTIONS, type OptionDefinition } from '../../config.js';
import { createLogger, openServiceStore, startService } from '../../service.js';
import { lockDataDir } from '../../store/lock.js';
import { TaskEventBus } from '../../tasks/event-bus.js';
import { action, dataDirOf, loadConfig, printJson, withCommonOptions, type CommonOptions } from '../context.js';

/** commander's property name for a flag: `--sweep-interval` -> `sweepInterval`. */
function propertyOf(flag: string): string {
  return flag.replace(/^--/, '').replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());
}

export function registerServe(program: Command): void {
  const command = program.command('serve').description('run the service (binds 127.0.0.1:5677 unless told otherwise)');
  for (const option of OPTIONS) command.option(`${option.flag} <value>`, `${option.description} [${option.env}; default ${option.defaultText}]`);
  withCommonOptions(command).action(action(async (options: CommonOptions & Record<string, string | undefined>) => {
    const flags: Partial<Record<OptionDefinition['key'], string>> = {};
    for (const option of OPTIONS) {
      const value = options[propertyOf(option.flag)];
      if (value !== undefined) flags[option.key] = value;
    }
    const dataDir = dataDirOf(options);
    const bus = new TaskEventBus();
    // One service per data directory: take the lock before touching the database.
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const lock = lockDataDir(dataDir);
    const store = openServiceStore(dataDir, bus);
    const config = loadConfig(options, store, flags);
    const log = createLogger(config);
    let service;
    try {
      service = await startService(config, store, bus, log);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
        log.error(`the address ${config.host}:${config.port} is already in use; pick another with --port`);
        process.exit(1);
      }
      throw error;
    }
    if (options.json) printJson(service.info);
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'stopping: unfinished tasks stay on disk and are recovered at the next start');
      service.close().then(() => {
        lock.release();
        process.exit(0);
      }, (error: unknown) => {
        log.error({ err: error }, 'error while stopping');
        process.exit(1);
      });
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  }));
}
