/**
 * The crash-safety torture harness (`npm run torture`).
 *
 * A bounded loop against the real service, on loopback only: every round starts (or restarts) the
 * built `lmsp serve` on the same data directory, lets a few concurrent client workers do random
 * work for a random short time, then SIGKILLs the service at that moment. While it is down the
 * database is opened read-only and checked; after the restart the API is checked too. A client-side
 * ledger remembers everything the service acknowledged, so that the checks can tell a lost 202 or
 * a second task behind one idempotency key from ordinary crash noise.
 *
 * Every count in the final table must be 0. The same invariants are checked by a short run in
 * test/torture/torture.test.ts; this file's main runs the long version.
 *
 * Also here, because they need the same machinery: the disk-full, read-only-filesystem and
 * corrupt-database checks (`runDiskFullCheck`, `runReadOnlyCheck`, `runCorruptDatabaseCheck`).
 *
 * This file is the entry point: the harness lives in bench/torture/ (run.ts the crash loop,
 * activity.ts the client workers, checks.ts the invariant checks, faults.ts and the files it names
 * the storage faults, ...); what the tests use is re-exported here.
 *
 *   node dist/bench/torture.js [--rounds N] [--seed S] [--workers W] [--no-faults] [--no-neighbour] [--keep-data-dir]
 *
 * A hostile neighbour (torture/neighbour.ts) floods the service beside the workers unless
 * --no-neighbour; the run then also fails when /healthz p99 is not under 250 ms.
 *
 * or LMSP_TORTURE_ROUNDS, LMSP_TORTURE_SEED, LMSP_TORTURE_WORKERS. Exit status 0 when every count
 * is 0, 1 when one is not, 2 when the harness itself failed.
 */
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { runCorruptDatabaseCheck } from './torture/corrupt-database.js';
import { runDiskFullCheck } from './torture/disk-full.js';
import { faultCountsClean, formatFault } from './torture/faults.js';
import { runReadOnlyCheck } from './torture/read-only.js';
import { formatReport, HEALTH_P99_TARGET_MS } from './torture/report.js';
import { runTorture } from './torture/run.js';

export { runCorruptDatabaseCheck } from './torture/corrupt-database.js';
export { runDiskFullCheck } from './torture/disk-full.js';
export { faultCountsClean, formatFault, type FaultReport } from './torture/faults.js';
export { Random } from './torture/random.js';
export { runReadOnlyCheck } from './torture/read-only.js';
export { formatReport, INVARIANTS, type Counts, type Invariant, type TortureOptions, type TortureReport } from './torture/report.js';
export { runTorture } from './torture/run.js';
export { referenceTexts } from './torture/shapes.js';

// ---------------------------------------------------------------------------------------------
// The long run when executed directly
// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string' }, seed: { type: 'string' }, workers: { type: 'string' },
      'no-faults': { type: 'boolean' }, 'keep-data-dir': { type: 'boolean' }, 'no-neighbour': { type: 'boolean' },
    },
  });
  const number = (flag: string | undefined, variable: string): number | undefined => {
    const text = flag ?? process.env[variable];
    if (text === undefined) return undefined;
    const value = Number(text);
    if (!Number.isInteger(value)) throw new Error(`${variable} / --${variable.replace(/^LMSP_TORTURE_/, '').toLowerCase()} must be an integer, not ${text}`);
    return value;
  };
  const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
  const report = await runTorture({
    rounds: number(values.rounds, 'LMSP_TORTURE_ROUNDS'),
    seed: number(values.seed, 'LMSP_TORTURE_SEED'),
    workers: number(values.workers, 'LMSP_TORTURE_WORKERS'),
    keepDataDir: values['keep-data-dir'] ?? false,
    neighbour: !values['no-neighbour'],
    log,
  });
  console.log(`\n${formatReport(report)}\n`);
  let clean = Object.values(report.counts).every((count) => count === 0);
  // LMSP 16: under the neighbour's floods /healthz keeps answering quickly.
  if (report.health) clean &&= report.health.p99 !== null && report.health.p99 < HEALTH_P99_TARGET_MS;
  if (!values['no-faults']) {
    for (const check of [runDiskFullCheck, runReadOnlyCheck, runCorruptDatabaseCheck]) {
      const started = Date.now();
      const fault = await check(log);
      console.log(`${formatFault(fault)}\n  (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
      clean &&= faultCountsClean(fault);
    }
  }
  console.log(clean ? 'torture: every count is 0' : 'torture: FAILURES above');
  process.exitCode = clean ? 0 : 1;
}

function executedDirectly(): boolean {
  if (!process.argv[1]) return false;
  try {
    return realpathSync(resolve(process.argv[1])) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (executedDirectly()) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(2);
  });
}
