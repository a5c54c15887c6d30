/**
 * The read-only-filesystem check: while the filesystem under the running service is read-only,
 * creates answer 503 storage_unavailable and what was committed stays readable; afterwards
 * nothing is lost.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { api, type TestService } from '../../test/helpers/service.js';
import {
  afterFault, countFault, countLost, createAccepted, mountEntry, mountTmpfs, newFault, run, someAcknowledged, startWitness, unmount, type FaultReport,
} from './faults.js';
import { killAndReap, sleep, startWithRetry } from './processes.js';
import { Info } from './report.js';
import { MODEL } from './shapes.js';

/**
 * A filesystem that turns read-only under the running service. First as asked: a tmpfs remounted
 * with `mount -o remount,ro`; Linux refuses that while a file is open for writing (the database
 * is), so when it does, the same happens for real on an ext4 image mounted with
 * errors=remount-ro, where an error (ext4's trigger_fs_error) makes the kernel turn the
 * filesystem read-only with the files still open. Neither possible (not root...): skipped, said.
 */
export async function runReadOnlyCheck(log: (line: string) => void = () => {}): Promise<FaultReport> {
  const report = newFault('read-only filesystem');
  const tmpfsOutcome = await readOnlyByRemount(report);
  if (tmpfsOutcome === 'done') {
    report.method = 'tmpfs remounted read-only while the service runs';
  } else {
    report.skipped.push(`tmpfs remount,ro while the service runs: ${tmpfsOutcome}`);
    const ext4Outcome = await readOnlyByExt4Error(report);
    if (ext4Outcome === 'done') report.method = 'ext4 image (loop, errors=remount-ro) turned read-only by trigger_fs_error while the service runs';
    else report.skipped.push(`ext4 errors=remount-ro: ${ext4Outcome}`);
  }
  for (const line of report.skipped) log(`read-only: skipped: ${line}`);
  return report;
}

/** While read-only: creates answer 503 storage_unavailable and committed responses stay readable. */
async function probeReadOnly(service: TestService, acknowledged: readonly string[], report: FaultReport): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const answer = await api(service, '/v1/responses', { method: 'POST', json: { model: MODEL, input: 'read-only', background: true, max_output_tokens: 5 }, signal: AbortSignal.timeout(30_000) });
    const body = (await answer.json()) as { error?: { code: string } };
    if (answer.status !== 503 || body.error?.code !== 'storage_unavailable') {
      countFault(report, 'create_not_503_while_read_only');
      report.notes.push(`create while read-only answered ${answer.status} ${JSON.stringify(body).slice(0, 160)}`);
    }
  }
  const lost = await countLost(service, acknowledged).catch(() => -1);
  report.notes.push(lost === -1 ? 'GETs failed while read-only' : `${acknowledged.length - lost}/${acknowledged.length} acknowledged responses readable while read-only`);
  if (lost > 0) countFault(report, 'lost_while_read_only', lost);
}

async function readOnlyByRemount(report: FaultReport): Promise<'done' | string> {
  const base = mkdtempSync(join(tmpdir(), 'lmsp-readonly-'));
  const whyNotMounted = mountTmpfs(base, '64m');
  if (whyNotMounted !== null) {
    rmSync(base, { recursive: true, force: true });
    return `cannot mount a tmpfs (${whyNotMounted})`;
  }
  let service: TestService | null = null;
  try {
    service = await startWithRetry({ dataDir: join(base, 'data'), env: { LMSP_DEBUG_TOKEN_DELAY_MS: '5' } });
    const witnessId = await startWitness(service);
    const acknowledged = [witnessId, ...(await someAcknowledged(service, 3, 5))];
    const remount = run('mount', ['-o', 'remount,ro', base]);
    if (!remount.ok) return `refused by the kernel (${remount.output.split('\n')[0]})`;
    try {
      await probeReadOnly(service, acknowledged, report);
    } finally {
      run('mount', ['-o', 'remount,rw', base]);
    }
    if (!(await createAccepted(service, acknowledged))) countFault(report, 'creates_refused_after_rw');
    service = await afterFault(service, acknowledged, report, witnessId);
    return 'done';
  } finally {
    if (service) await killAndReap(service, new Info());
    unmount(base);
    rmSync(base, { recursive: true, force: true });
  }
}

async function readOnlyByExt4Error(report: FaultReport): Promise<'done' | string> {
  if (process.getuid?.() !== 0) return 'not running as root';
  if (!run('which', ['mkfs.ext4']).ok) return 'mkfs.ext4 is not installed';
  const work = mkdtempSync(join(tmpdir(), 'lmsp-ext4-'));
  const image = join(work, 'fs.img');
  const base = join(work, 'mnt');
  let service: TestService | null = null;
  try {
    writeFileSync(image, '');
    run('truncate', ['-s', '64M', image]);
    const mkfs = run('mkfs.ext4', ['-q', '-F', image]);
    if (!mkfs.ok) return `mkfs.ext4 failed: ${mkfs.output}`;
    run('mkdir', ['-p', base]);
    const mounted = run('mount', ['-o', 'loop,errors=remount-ro', image, base]);
    if (!mounted.ok) return `cannot mount the image: ${mounted.output}`;
    const device = mountEntry(base)?.source ?? '';
    const trigger = `/sys/fs/ext4/${basename(device)}/trigger_fs_error`;
    if (!existsSync(trigger)) return `no ${trigger}`;

    // Tasks mid-flight when the filesystem goes: slow tokens keep them running.
    service = await startWithRetry({ dataDir: join(base, 'data'), env: { LMSP_DEBUG_TOKEN_DELAY_MS: '5' } });
    const witnessId = await startWitness(service);
    const acknowledged = [witnessId, ...(await someAcknowledged(service, 6, 200))];
    await sleep(500);
    writeFileSync(trigger, 'lmsp torture: read-only test\n');
    const readOnly = mountEntry(base)?.options.some((option) => option === 'ro' || option === 'emergency_ro') ?? false;
    if (!readOnly) return 'the filesystem did not turn read-only after trigger_fs_error';
    await probeReadOnly(service, acknowledged, report);
    // Back to read-write: ext4 wants an unmount and a fsck after an error, not a remount.
    await killAndReap(service, new Info());
    unmount(base);
    const fsck = spawnSync('e2fsck', ['-fy', image], { encoding: 'utf8', timeout: 60_000 });
    if ((fsck.status ?? 8) > 1) report.notes.push(`e2fsck exited ${fsck.status}: ${fsck.stdout.slice(-200)}`);
    const again = run('mount', ['-o', 'loop,errors=remount-ro', image, base]);
    if (!again.ok) throw new Error(`cannot mount the image again: ${again.output}`);
    service = await afterFault(service, acknowledged, report, witnessId);
    return 'done';
  } finally {
    if (service) await killAndReap(service, new Info());
    unmount(base);
    rmSync(work, { recursive: true, force: true });
  }
}
