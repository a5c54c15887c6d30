/** `lmsp gc`: run the retention sweeper by hand (LMSP section 10). */
import type { Command } from 'commander';
import type { SweepCounts } from '../../store/retention.js';
import { Sweeper } from '../../tasks/sweeper.js';
import { action, loadConfig, openStore, printJson, runningService, withCommonOptions, type CommonOptions } from '../context.js';

export function registerGc(program: Command): void {
  withCommonOptions(program.command('gc')
    .description('delete finished tasks older than the retention period, now')
    .option('--retention <duration>', "override the retention period ('forever' keeps everything)")
    .option('--dry-run', 'count what would be deleted, delete nothing'))
    .action(action(async (options: CommonOptions & { retention?: string; dryRun?: boolean }) => {
      // LMSP 10: gc runs the sweeper by hand, so while the service runs, by the retention it
      // was started with (a service kept `forever` must not lose a week-old task to a bare gc).
      const serviceRetention = options.retention ? undefined : (await runningService(options))?.retention;
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
      await store.close();
      if (options.json) printJson({ dry_run: false, ...countsJson(counts) });
      else process.stdout.write(`deleted ${describe(counts)}\n`);
    }));
}

const countsJson = (counts: SweepCounts) => ({ tasks: counts.tasks, events: counts.events, idempotency_keys: counts.idempotencyKeys, pairing_codes: counts.pairingCodes });

/** A finished task goes with its response or chat completion, so the tasks count those too. */
const describe = (counts: SweepCounts) => `${counts.tasks} finished tasks (with their responses and chat completions), ${counts.events} events, `
  + `${counts.idempotencyKeys} idempotency keys and ${counts.pairingCodes} pairing codes`;
