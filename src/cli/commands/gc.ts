/** `lmsp gc`: run the retention sweeper by hand (LMSP section 10). */
import type { Command } from 'commander';
import type { SweepCounts } from '../../store/retention.js';
import { Sweeper } from '../../tasks/sweeper.js';
import { action, CliError, fileSize, loadConfig, openStore, printJson, runningService, withCommonOptions, type CommonOptions } from '../context.js';

export function registerGc(program: Command): void {
  withCommonOptions(program.command('gc')
    .description('delete finished tasks older than the retention period, now')
    .option('--retention <duration>', "override the retention period ('forever' keeps everything)")
    .option('--dry-run', 'count what would be deleted, delete nothing')
    .option('--vacuum', 'then rewrite the database file to its smallest size (with the service stopped)'))
    .action(action(async (options: CommonOptions & { retention?: string; dryRun?: boolean; vacuum?: boolean }) => {
      // LMSP 10: gc runs the sweeper by hand, so while the service runs, by the retention it
      // was started with (a service kept `forever` must not lose a week-old task to a bare gc).
      const service = await runningService(options);
      // VACUUM rewrites the whole file and holds the database while it does: not under a service.
      if (options.vacuum && !options.dryRun && service) {
        throw new CliError(`lmsp gc --vacuum rewrites the database: stop the service (pid ${service.pid}) first`);
      }
      const serviceRetention = options.retention ? undefined : service?.retention;
      const retention = options.retention ?? serviceRetention;
      const store = openStore(options);
      const config = loadConfig(options, store, retention ? { retentionMs: retention } : {});
      const sweeper = new Sweeper(store, { retentionMs: config.retentionMs, sweepIntervalMs: Infinity });
      if (options.dryRun) {
        const counts = sweeper.count();
        await store.close();
        if (options.json) printJson({ dry_run: true, ...countsJson(counts) });
        else process.stdout.write(`would delete ${describe(counts)} (nothing deleted)\n`);
        return;
      }
      const counts = await sweeper.sweep();
      let vacuumed: { bytes_before: number; bytes_after: number } | null = null;
      if (options.vacuum) {
        const before = databaseBytes(store.db.path);
        store.db.vacuum();
        store.db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
        vacuumed = { bytes_before: before, bytes_after: databaseBytes(store.db.path) };
      }
      await store.close();
      if (options.json) printJson({ dry_run: false, ...countsJson(counts), ...(vacuumed ? { vacuum: vacuumed } : {}) });
      else {
        process.stdout.write(`deleted ${describe(counts)}\n`);
        if (vacuumed) process.stdout.write(`database rewritten: ${vacuumed.bytes_before} bytes before, ${vacuumed.bytes_after} after\n`);
      }
    }));
}

/** The database file with its write-ahead log. */
function databaseBytes(path: string): number {
  return fileSize(path) + fileSize(`${path}-wal`);
}

const countsJson = (counts: SweepCounts) => ({ tasks: counts.tasks, events: counts.events, idempotency_keys: counts.idempotencyKeys, pairing_codes: counts.pairingCodes });

/** A finished task goes with its response or chat completion, so the tasks count those too. */
const describe = (counts: SweepCounts) => `${counts.tasks} finished tasks (with their responses and chat completions), ${counts.events} events, `
  + `${counts.idempotencyKeys} idempotency keys and ${counts.pairingCodes} pairing codes`;
