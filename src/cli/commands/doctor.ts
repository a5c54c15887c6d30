/** `lmsp doctor`: checks the database, the model files and the running service (LMSP section 12). */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { OPERATOR_TOKEN_FILE } from '../../auth/clients.js';
import { fileStampOf, sameFile } from '../../domain/models.js';
import { hashFile } from '../../models/hashing.js';
import { ModelRegistry } from '../../models/registry.js';
import { DATABASE_FILE, Store } from '../../store/index.js';
import { action, dataDirOf, holderOfSilentDataDir, loadConfig, printJson, runningService, withCommonOptions, type CommonOptions } from '../context.js';

interface Check {
  check: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
}

export function registerDoctor(program: Command): void {
  withCommonOptions(program.command('doctor')
    .description('check the database, the model files and the running service')
    .option('--verify', 're-hash every model file against its recorded digest'))
    .action(action(async (options: CommonOptions & { verify?: boolean }) => {
      const dataDir = dataDirOf(options);
      const checks: Check[] = [];
      const add = (check: string, status: Check['status'], detail: string) => checks.push({ check, status, detail });
      const dbPath = join(dataDir, DATABASE_FILE);
      let store: Store | null = null;
      // Read before opening it, which makes it private to its owner again.
      const mode = existsSync(dbPath) ? statSync(dbPath).mode & 0o777 : null;
      try {
        // A database missing (its log left behind or not) is refused here with what to do.
        store = Store.open(dataDir, { create: false, check: false });
        const result = store.db.sqlite.pragma('integrity_check', { simple: true });
        add('database', result === 'ok' ? 'ok' : 'fail', result === 'ok' ? `${dbPath} (schema ${store.db.schemaVersion}, integrity ok)` : String(result));
        if (mode !== null) add('database permissions', mode & 0o077 ? 'warn' : 'ok', `mode ${mode.toString(8)}${mode & 0o077 ? ' (readable by others; made private again now)' : ''}`);
      } catch (error) {
        add('database', 'fail', (error as Error).message);
      }
      if (store) {
        const modelsDirs = await new ModelRegistry(store, loadConfig(options, store).modelsDir).realModelsDirs();
        for (const model of store.models.list()) {
          if (!existsSync(model.path)) {
            add(`model ${model.id}`, 'fail', `file missing: ${model.path}`);
            continue;
          }
          const changed = !sameFile(model, fileStampOf(statSync(model.path, { bigint: true })));
          if (options.verify || changed) {
            let digest;
            try {
              ({ digest } = await hashFile(model.path, modelsDirs));
            } catch (error) {
              // A link, a pipe or a folder at its path, a file written to or gone meanwhile.
              add(`model ${model.id}`, 'fail', (error as Error).message);
              continue;
            }
            add(`model ${model.id}`, digest === model.digest ? 'ok' : 'fail', digest === model.digest ? `${model.digest} verified` : `digest is ${digest}, recorded ${model.digest}`);
          } else {
            add(`model ${model.id}`, model.status === 'ready' ? 'ok' : 'warn', `${model.path} (${model.status}; unchanged since it was hashed)`);
          }
        }
        const counts = store.tasks.countByStatus();
        add('tasks', 'ok', Object.entries(counts).map(([status, n]) => `${n} ${status}`).join(', ') || 'none');
        store.db.sqlite.close();
      }
      const tokenPath = join(dataDir, OPERATOR_TOKEN_FILE);
      if (existsSync(tokenPath)) {
        const mode = statSync(tokenPath).mode & 0o777;
        add('operator token', mode & 0o077 ? 'fail' : 'ok', `${tokenPath} mode ${mode.toString(8)}`);
      } else {
        add('operator token', 'warn', 'not created yet (the service creates it at start)');
      }
      const info = await runningService(options);
      const holder = info ? null : holderOfSilentDataDir(dataDir);
      if (holder === 'another process') {
        add('service', 'warn', 'not answering: another lmsp process holds the data directory (a service still starting, or a command such as `lmsp models pull` run without one)');
      } else if (holder) {
        add('service', 'fail', `${holder.url} (pid ${holder.pid}) holds the data directory but does not answer`);
      } else if (!info) {
        add('service', 'warn', 'not running');
      } else {
        try {
          const health = await fetch(`${info.url}/healthz`);
          add('service', health.ok ? 'ok' : 'fail', `${info.url} (pid ${info.pid}) answers ${health.status}`);
        } catch (error) {
          add('service', 'fail', `${info.url} (pid ${info.pid}) does not answer: ${(error as Error).message}`);
        }
      }
      if (options.json) printJson({ ok: checks.every((check) => check.status !== 'fail'), checks });
      else for (const check of checks) process.stdout.write(`${check.status.padEnd(4)}  ${check.check}: ${check.detail}\n`);
      if (checks.some((check) => check.status === 'fail')) process.exitCode = 1;
    }));
}
