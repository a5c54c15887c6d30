/**
 * The disk-full check: the service must answer 503 storage_unavailable rather than lose or
 * half-write anything, and accept creates again once there is space.
 */
import BetterSqlite3 from 'better-sqlite3';
import { closeSync, mkdtempSync, openSync, rmSync, statfsSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ResponseObject } from '../../src/api/types.js';
import { api, type TestService } from '../../test/helpers/service.js';
import { allTasks, drain, unfinishedCount } from './checks.js';
import {
  afterFault, countFault, countLost, createAccepted, mountTmpfs, newFault, outputTokens, POLICIES, startWitness, unmount, type FaultReport,
} from './faults.js';
import { killAndReap, sleep, startWithRetry } from './processes.js';
import { Info } from './report.js';
import { MODEL } from './shapes.js';

/**
 * A full disk. Preferably real: a 16 MB tmpfs holds the data directory, a filler file takes all
 * but ~2 MB, and background creates go on until the service answers 503 storage_unavailable;
 * then the filler goes and creates must be accepted again. Without mount (not root, or
 * `mount: false`), the service's LMSP_DEBUG_DB_MAX_PAGES caps the database a little above its
 * size instead, and the restart without the cap gives the space back.
 */
export async function runDiskFullCheck(log: (line: string) => void = () => {}, options: { mount?: boolean } = {}): Promise<FaultReport> {
  const report = newFault('disk full');
  const base = mkdtempSync(join(tmpdir(), 'lmsp-diskfull-'));
  const whyNotMounted = options.mount === false ? 'not asked to' : mountTmpfs(base, '16m');
  report.method = whyNotMounted === null ? 'tmpfs of 16 MB, filled by a file' : `LMSP_DEBUG_DB_MAX_PAGES caps the database (no tmpfs: ${whyNotMounted})`;
  log(`disk full: ${report.method}`);
  const dataDir = join(base, 'data');
  let service: TestService | null = null;
  try {
    // Slow tokens, so that tasks (the witness above all) are still writing output when the disk
    // fills up.
    const env = { LMSP_DEBUG_TOKEN_DELAY_MS: '3' };
    service = await startWithRetry({ dataDir, env });
    const filler = join(base, 'filler');
    if (whyNotMounted !== null) {
      await killAndReap(service, new Info());
      const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true });
      const pages = Number(db.pragma('page_count', { simple: true }));
      db.close();
      service = await startWithRetry({ env: { ...env, LMSP_DEBUG_DB_MAX_PAGES: String(pages + 60) } }, service);
    }
    const witnessId = await startWitness(service);
    const acknowledged: string[] = [witnessId];
    if (whyNotMounted === null) writeFiller(filler, statfsSync(base).bavail * statfsSync(base).bsize - 2 * 1024 * 1024);
    const unavailable = await fillUntil503(service, acknowledged, report, 400);
    report.notes.push(`${acknowledged.length - 1} creates accepted, then ${unavailable} answered 503 storage_unavailable`);
    if (unavailable === 0) countFault(report, 'never_storage_unavailable');
    // While full: what was committed is readable, and a 503 left nothing half-written behind.
    const tokensAtFull = await outputTokens(service, witnessId);
    await sleep(1000);
    report.notes.push(`the witness had ${tokensAtFull} tokens when the disk was full, ${await outputTokens(service, witnessId)} a second later`);
    countFault(report, 'lost_while_full', await countLost(service, acknowledged));
    const listed = (await allTasks(service)).map((task) => task.response_id ?? task.id);
    const extra = listed.filter((id) => !acknowledged.includes(id));
    if (extra.length > 0) {
      countFault(report, 'half_written_records', extra.length);
      report.notes.push(`tasks that no 202 announced: ${extra.slice(0, 3).join(', ')}`);
    }
    // Space again: the running service must accept creates at once (tmpfs); with the page cap, a
    // restart without it is the only way to give space back.
    if (whyNotMounted === null) {
      unlinkSync(filler);
      if (!(await createAccepted(service, acknowledged))) countFault(report, 'creates_refused_after_space_freed');
      const stuck = (await drain(service, 15_000)) ? 0 : await unfinishedCount(service);
      report.notes.push(`${stuck} tasks were still unfinished 15 s after space was freed, before any restart`);
    }
    service = await afterFault(service, acknowledged, report, witnessId);
  } finally {
    if (service) await killAndReap(service, new Info());
    unmount(base);
    rmSync(base, { recursive: true, force: true });
  }
  return report;
}

/** Creates background responses one after another until the service answers 503 (bounded). */
async function fillUntil503(service: TestService, acknowledged: string[], report: FaultReport, maxCreates: number): Promise<number> {
  // Most of each request's weight is metadata (16 values of 500 characters): it is stored with the
  // response and its first event, but costs the model nothing.
  const metadata = Object.fromEntries(Array.from({ length: 16 }, (_, index) => [`filler${index}`, 'x'.repeat(500)]));
  let unavailable = 0;
  for (let index = 0; index < maxCreates && unavailable < 3; index++) {
    const answer = await api(service, '/v1/responses', {
      method: 'POST', signal: AbortSignal.timeout(30_000),
      json: { model: MODEL, input: `fill ${index} ${'y'.repeat(2000)}`, background: true, max_output_tokens: 40, metadata, on_restart: POLICIES[index % 3] },
    });
    const body = (await answer.json()) as ResponseObject & { error?: { code: string; type: string } };
    if (answer.status === 202) {
      acknowledged.push(body.id);
    } else if (answer.status === 503 && body.error?.code === 'storage_unavailable') {
      unavailable += 1;
    } else {
      countFault(report, 'unexpected_answers');
      report.notes.push(`create ${index} answered ${answer.status} ${JSON.stringify(body.error ?? body).slice(0, 200)}`);
    }
  }
  return unavailable;
}

function writeFiller(path: string, bytes: number): void {
  const chunk = Buffer.alloc(1024 * 1024, 0x5a);
  const fd = openSync(path, 'w');
  try {
    for (let written = 0; written < bytes && written < 64 * 1024 * 1024;) {
      const length = Math.min(chunk.length, bytes - written);
      writeSync(fd, chunk, 0, length);
      written += length;
    }
  } finally {
    closeSync(fd);
  }
}
