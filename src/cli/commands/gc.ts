/** `lmsp gc`: run the retention sweeper by hand (LMSP section 10). */
import type { Command } from 'commander';
import { retentionCutoff, Sweeper } from '../../tasks/sweeper.js';
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
      if (options.dryRun) {
        const counts = store.retention.countExpired(retentionCutoff(config.retentionMs));
        await store.close();
        if (options.json) printJson({ dry_run: true, tasks: counts.tasks, events: counts.events });
        else process.stdout.write(`would delete ${counts.tasks} finished tasks and ${counts.events} events (nothing deleted)\n`);
        return;
      }
      const counts = await new Sweeper(store, { retentionMs: config.retentionMs, sweepIntervalMs: Infinity }).sweep();
      await store.close();
      if (options.json) printJson({ dry_run: false, tasks: counts.tasks, events: counts.events, idempotency_keys: counts.idempotencyKeys, pairing_codes: counts.pairingCodes });
      else process.stdout.write(`deleted ${counts.tasks} finished tasks, ${counts.events} events, ${counts.idempotencyKeys} idempotency keys and ${counts.pairingCodes} pairing codes\n`);
    }));
}
