/**
 * The crash torture, short: a few dozen SIGKILLs of the real service at random moments under
 * random client activity (bench/torture.ts; `npm run torture` is the long run), and every
 * invariant must hold: each count is 0. Then the storage faults: a full disk, a filesystem that
 * turns read-only under the running service, and a corrupt database.
 *
 * The seed is random unless LMSP_TORTURE_SEED is set; it is printed, so a failure can be
 * replayed (timing still differs from run to run: the kills land where they land).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  faultCountsClean, formatFault, formatReport, runCorruptDatabaseCheck, runDiskFullCheck, runReadOnlyCheck, runTorture, type FaultReport,
} from '../../bench/torture.js';

const ROUNDS = 30;

function log(line: string): void {
  console.log(`# ${line}`);
}

function print(text: string): void {
  for (const line of text.split('\n')) log(line);
}

function assertFaultClean(report: FaultReport): void {
  assert.ok(faultCountsClean(report), formatFault(report));
}

describe('crash torture, short run (bench/torture.ts)', () => {
  test(`${ROUNDS} SIGKILLs under random client activity: every invariant holds`, { timeout: 280_000 }, async () => {
    const seed = process.env.LMSP_TORTURE_SEED ? Number(process.env.LMSP_TORTURE_SEED) : Date.now() % 2 ** 31;
    const report = await runTorture({ rounds: ROUNDS, workers: 3, seed, log, neighbour: true });
    print(formatReport(report));
    assert.equal(report.kills, ROUNDS);
    assert.ok(report.health && report.health.samples > 0, 'the neighbour ran and the prober saw /healthz answer');
    assert.ok(report.tasksCreated >= ROUNDS, `only ${report.tasksCreated} tasks were acknowledged: the activity did too little`);
    for (const [invariant, count] of Object.entries(report.counts)) {
      const examples = report.examples[invariant as keyof typeof report.examples] ?? [];
      assert.equal(count, 0, `${invariant} (seed ${seed}):\n${examples.join('\n')}\ndata directory: ${report.dataDir}`);
    }
  });

  test('disk full: 503 storage_unavailable, nothing committed lost, creates accepted again once there is space', { timeout: 120_000 }, async () => {
    const report = await runDiskFullCheck(log);
    print(formatFault(report));
    // Includes the seeded task that was writing output as the disk filled: it must still end
    // with the text of an uninterrupted run (no hole in its resume snapshot).
    assertFaultClean(report);
    assert.ok(report.notes.some((note) => /answered 503 storage_unavailable/.test(note)));
  });

  test('read-only filesystem under the running service: 503 storage_unavailable, nothing lost', { timeout: 120_000 }, async (t) => {
    const report = await runReadOnlyCheck(log);
    print(formatFault(report));
    // Mounting needs root; without it the check cannot make the fault and says so.
    if (!report.method) {
      t.skip(`not possible here: ${report.skipped.join('; ')}`);
      return;
    }
    assertFaultClean(report);
  });

  test('a corrupt database: serve exits non-zero at once, says so, and leaves the file as it was', { timeout: 120_000 }, async () => {
    const report = await runCorruptDatabaseCheck(log);
    print(formatFault(report));
    assertFaultClean(report);
    assert.equal(report.notes.length, 2);
  });
});
