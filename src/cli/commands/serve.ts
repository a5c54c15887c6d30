/** `lmsp serve`: run the service (LMSP section 12). */
import { closeSync } from 'node:fs';
import { createServer } from 'node:net';
import { constants as osConstants } from 'node:os';
import { isatty } from 'node:tty';
import type { Command } from 'commander';
import { OPTIONS, resolveConfig, type OptionDefinition, type ServiceConfig } from '../../config.js';
import { createLogger, openServiceStore, startService } from '../../service.js';
import { EXIT_DATABASE_UNAVAILABLE } from '../../store/db.js';
import { TaskEventBus } from '../../tasks/event-bus.js';
import { action, CliError, dataDirOf, keepRunningWhenStdoutCloses, loadConfig, lockDataDirForThisProcess, printJson, withCommonOptions, type CommonOptions } from '../context.js';

/** Why the service cannot listen where it was told to, and what to change; null for other errors. */
function listenFailure(error: NodeJS.ErrnoException, config: ServiceConfig): string | null {
  const address = `${config.host}:${config.port}`;
  switch (error.code) {
    case 'EADDRINUSE':
      return `the address ${address} is already in use; pick another with --port`;
    case 'EACCES':
      return `not allowed to listen on ${address} (ports below 1024 need privileges); pick another with --port`;
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `cannot listen on ${address} (${error.code}): --host must be an address of this machine, such as 127.0.0.1`;
    default:
      return null;
  }
}

/**
 * Fails as listening would if this machine cannot listen on the host at all (a name that does
 * not resolve, an address of another machine): asked before anything is written to disk.
 */
async function assertCanListenOn(config: ServiceConfig): Promise<void> {
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ host: config.host, port: 0 }, resolve);
    });
  } catch (error) {
    throw new CliError(listenFailure(error as NodeJS.ErrnoException, config) ?? `cannot listen on ${config.host}: ${(error as Error).message}`, 1);
  } finally {
    probe.close();
  }
}

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
    // A flag or LMSP_* variable that does not parse is a usage error before anything is created on disk.
    await assertCanListenOn(resolveConfig({ flags, dataDirFlag: options.dataDir }));
    const dataDir = dataDirOf(options);
    keepRunningWhenStdoutCloses();
    const bus = new TaskEventBus();
    // One service per data directory: take the lock (which creates the directory) before touching the database.
    const lock = lockDataDirForThisProcess(dataDir);
    let store;
    try {
      store = openServiceStore(dataDir, bus);
    } catch (error) {
      // A database refused (corrupt, read-only, too new) leaves the data directory as it was.
      lock.release();
      throw error;
    }
    const config = loadConfig(options, store, flags);
    // LMSP 12: with --json, standard output is the one document below; the log goes to stderr.
    const logFd = options.json ? 2 : 1;
    const log = createLogger(config, options.json ? process.stderr : process.stdout);
    // The signal handlers come before the start, so that a stop asked for once the service has
    // reported its address is always a clean one: without a handler, a SIGTERM that arrived
    // between printing the address and registering one killed the process outright. A stop asked
    // for while it starts ends it at once, as a crash would (recovery is built for that), rather
    // than after a start that may take long.
    let service: Awaited<ReturnType<typeof startService>> | undefined;
    let stopping = false;
    // SIGHUP: the terminal went away. A service started on one stops cleanly with it, and writes
    // nothing more there (a write to a terminal that hung up fails, or blocks the process); one
    // started on none (under nohup, by a service manager, its output in files) goes on, as nohup
    // means it to: Node sets back to the default the SIGHUP that nohup ignores, which would kill
    // it outright. Asked at the start: once the terminal has hung up, it is no terminal any more.
    const terminalFds = [0, 1, 2].filter((fd) => isatty(fd));
    let hungUp = false;
    const exit = (code: number): never => {
      // Node sets a terminal back as it was when it exits, and aborts when that terminal has hung
      // up (the call fails): its descriptors are closed first, which Node then passes over.
      if (hungUp) {
        for (const fd of terminalFds) {
          try {
            closeSync(fd);
          } catch {
            // closed already
          }
        }
      }
      return process.exit(code);
    };
    const stop = (signal: NodeJS.Signals | 'database lost') => {
      if (stopping) return;
      stopping = true;
      if (!service) {
        log.info({ signal }, 'stopping before the start finished: unfinished tasks stay on disk and are recovered at the next start');
        return exit(128 + osConstants.signals[signal as NodeJS.Signals]);
      }
      if (signal !== 'database lost') log.info({ signal }, 'stopping: unfinished tasks stay on disk and are recovered at the next start');
      service.close().then(() => {
        lock.release();
        exit(signal === 'database lost' ? EXIT_DATABASE_UNAVAILABLE : 0);
      }, (error: unknown) => {
        log.error({ err: error }, 'error while stopping');
        exit(1);
      });
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGHUP', () => {
      if (terminalFds.length === 0) return void log.info({ signal: 'SIGHUP' }, 'SIGHUP ignored: no terminal is attached, so none went away');
      // A signal sent by hand finds the terminal still there; a hangup finds it gone (no terminal any more).
      hungUp = terminalFds.some((fd) => !isatty(fd));
      // Only a log written to that terminal goes quiet: one written to a file still says the service stopped.
      if (hungUp && terminalFds.includes(logFd)) log.level = 'silent';
      stop('SIGHUP');
    });
    try {
      service = await startService(config, store, bus, log);
      service.onDatabaseLost(() => stop('database lost'));
    } catch (error) {
      // A start that failed leaves the data directory as a stop does (startService closed the database).
      lock.release();
      const failure = listenFailure(error as NodeJS.ErrnoException, config);
      if (failure) throw new CliError(failure, 1);
      throw error;
    }
    if (options.json) printJson(service.info);
  }));
}
