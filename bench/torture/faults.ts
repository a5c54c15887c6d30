/**
 * What the storage-fault checks (disk-full.ts, read-only.ts, corrupt-database.ts) share: their
 * report and its printing, mounts, the witness task that is mid-output when a fault comes, and
 * the checks after the fault, on the service started again undisturbed.
 */
import BetterSqlite3 from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import type { CreateResponseBody, ResponseObject } from '../../src/api/types.js';
import type { RestartPolicy } from '../../src/domain/tasks.js';
import { api, type TestService } from '../../test/helpers/service.js';
import { allTasks, attemptText, drain, eventsViaApi, FINAL_STATUSES, inBatches, unfinishedCount } from './checks.js';
import { killAndReap, sleep, startWithRetry } from './processes.js';
import { Info } from './report.js';
import { MODEL, textOf } from './shapes.js';

/** The restart policies, taken in turn by the creates of the fault checks. */
export const POLICIES: RestartPolicy[] = ['fail', 'retry', 'resume'];

export interface FaultReport {
  name: string;
  /** How the fault was made (a 16 MB tmpfs, the page cap, an ext4 image...). */
  method: string;
  /** Why (part of) the check could not run; printed, never faked. */
  skipped: string[];
  /** Each must be 0. */
  counts: Record<string, number>;
  notes: string[];
}

export function newFault(name: string): FaultReport {
  return { name, method: '', skipped: [], counts: {}, notes: [] };
}

export function countFault(report: FaultReport, name: string, by = 1): void {
  report.counts[name] = (report.counts[name] ?? 0) + by;
}

export function run(command: string, args: string[]): { ok: boolean; output: string } {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 30_000 });
  return { ok: result.status === 0, output: `${result.stdout ?? ''}${result.stderr ?? ''}${result.error ? String(result.error) : ''}`.trim() };
}

/** `mount -t tmpfs -o size=N tmpfs DIR`; null when it worked, else why not. */
export function mountTmpfs(dir: string, size: string): string | null {
  if (process.getuid?.() !== 0) return 'not running as root';
  const result = run('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
  return result.ok ? null : result.output || 'mount failed';
}

/** Unmounts, lazily if the mount is still busy; never throws (it runs in finally blocks). */
export function unmount(dir: string): void {
  if (!isMountPoint(dir)) return;
  if (!run('umount', [dir]).ok) run('umount', ['-l', dir]);
}

export function mountEntry(dir: string): { source: string; options: string[] } | null {
  const target = realpathSync(dir);
  const lines = readFileSync('/proc/self/mounts', 'utf8').split('\n');
  // The last entry for a mount point is the one in effect.
  for (const line of lines.reverse()) {
    const [source, mountPoint, , options] = line.split(' ');
    if (mountPoint === target && source && options) return { source, options: options.split(',') };
  }
  return null;
}

function isMountPoint(dir: string): boolean {
  try {
    return mountEntry(dir) !== null;
  } catch {
    return false;
  }
}

/** GET of every acknowledged response; 404s are lost commits. */
export async function countLost(service: TestService, acknowledged: readonly string[]): Promise<number> {
  let lost = 0;
  await inBatches(acknowledged, 8, async (responseId) => {
    const answer = await api(service, `/v1/responses/${responseId}`, { signal: AbortSignal.timeout(10_000) });
    await answer.body?.cancel().catch(() => undefined);
    if (answer.status === 404) lost += 1;
  });
  return lost;
}

/** `PRAGMA integrity_check` on the database opened read-only (the service must be down). */
function integrityCheck(dataDir: string): string {
  const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true, fileMustExist: true });
  try {
    return (db.pragma('integrity_check') as Array<{ integrity_check: string }>).map((row) => row.integrity_check).join('; ');
  } finally {
    db.close();
  }
}

/**
 * A create that must be accepted, tried for a few seconds (the first may still meet a full WAL);
 * the accepted response joins `acknowledged`.
 */
export async function createAccepted(service: TestService, acknowledged: string[], attempts = 20): Promise<boolean> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const answer = await api(service, '/v1/responses', { method: 'POST', json: { model: MODEL, input: 'space again', background: true, max_output_tokens: 5 }, signal: AbortSignal.timeout(10_000) });
    const body = (await answer.json()) as ResponseObject;
    if (answer.status === 202) {
      acknowledged.push(body.id);
      return true;
    }
    await sleep(250);
  }
  return false;
}

/**
 * A seeded resume task that is mid-output when a fault comes: whatever the storage did to it, it
 * must end with exactly the text of an uninterrupted run (LMSP 7.5).
 */
const WITNESS: CreateResponseBody = { model: MODEL, input: 'A witness of the fault.', seed: 77, temperature: 1, top_p: 0.9, max_output_tokens: 1000 };

/** Starts the witness and waits (bounded) until it has some output committed. */
export async function startWitness(service: TestService): Promise<string> {
  const answer = await api(service, '/v1/responses', { method: 'POST', json: { ...WITNESS, background: true, on_restart: 'resume' }, signal: AbortSignal.timeout(30_000) });
  if (answer.status !== 202) throw new Error(`the witness create answered ${answer.status}: ${await answer.text()}`);
  const responseId = ((await answer.json()) as ResponseObject).id;
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && (await outputTokens(service, responseId)) < 20) await sleep(50);
  return responseId;
}

export async function outputTokens(service: TestService, responseId: string): Promise<number> {
  const response = (await (await api(service, `/v1/responses/${responseId}`, { signal: AbortSignal.timeout(10_000) })).json()) as ResponseObject;
  return response.usage?.output_tokens ?? 0;
}

/** Waits (bounded) for a response's task to finish; the response as it is then. */
async function finishedResponse(service: TestService, responseId: string, timeoutMs: number): Promise<ResponseObject> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = (await (await api(service, `/v1/responses/${responseId}`, { signal: AbortSignal.timeout(10_000) })).json()) as ResponseObject;
    if (FINAL_STATUSES.has(response.task.status) || Date.now() > deadline) return response;
    await sleep(100);
  }
}

async function checkWitness(service: TestService, responseId: string, report: FaultReport): Promise<void> {
  const witness = await finishedResponse(service, responseId, 60_000);
  // The uninterrupted run, on the same (now undisturbed) service.
  const answer = await api(service, '/v1/responses', { method: 'POST', json: { ...WITNESS, background: true }, signal: AbortSignal.timeout(30_000) });
  const reference = await finishedResponse(service, ((await answer.json()) as ResponseObject).id, 120_000);
  const resumed = (await eventsViaApi(service, witness.task.id)).filter((event) => event.type === 'response.resumed').length;
  const why = witness.error ? ` (${witness.error.code}: ${witness.error.message})` : '';
  report.notes.push(`the witness task ended ${witness.task.status}${why} after ${resumed} resume(s), attempt ${witness.task.attempt}`);
  if (reference.task.status !== 'completed') {
    countFault(report, 'reference_run_unfinished');
    report.notes.push(`the uninterrupted run of the witness's request was still ${reference.task.status} after 120 s (${reference.usage?.output_tokens ?? 0} tokens)`);
  } else if (witness.task.status !== 'completed') {
    countFault(report, 'witness_not_completed');
  } else if (textOf(witness) !== textOf(reference)) {
    countFault(report, 'witness_text_differs_from_uninterrupted_run');
  }
}

/**
 * After the fault, with the service killed and started again undisturbed: integrity_check ok,
 * nothing acknowledged lost, creates accepted, every task finishes with a log numbered 1..N whose
 * deltas make its final text, and the witness's text is exact.
 */
export async function afterFault(service: TestService, acknowledged: readonly string[], report: FaultReport, witnessId: string | null): Promise<TestService> {
  await killAndReap(service, new Info());
  const integrity = integrityCheck(service.dataDir);
  if (integrity !== 'ok') {
    countFault(report, 'integrity_check_failures');
    report.notes.push(`integrity_check: ${integrity}`);
  }
  const restarted = await startWithRetry({ env: {}, args: [] }, service);
  countFault(report, 'lost_after_restart', await countLost(restarted, acknowledged));
  if (!(await createAccepted(restarted, [...acknowledged]))) countFault(report, 'creates_refused_after_restart');
  if (!(await drain(restarted, 60_000))) countFault(report, 'unfinished_after_restart', await unfinishedCount(restarted));
  for (const task of (await allTasks(restarted)).filter((each) => FINAL_STATUSES.has(each.status))) {
    const events = await eventsViaApi(restarted, task.id);
    const numbersOk = events.length === task.last_sequence_number && events.every((event, index) => event.sequence_number === index + 1);
    if (!numbersOk) countFault(report, 'event_log_errors');
    const response = (await (await api(restarted, `/v1/responses/${task.response_id}`, { signal: AbortSignal.timeout(10_000) })).json()) as ResponseObject;
    const deltas = attemptText(events.map((event) => ({ sequence_number: event.sequence_number, type: event.type, delta: event.delta, attempt: (event.response as ResponseObject | undefined)?.task.attempt })));
    if (deltas !== textOf(response)) countFault(report, 'delta_text_mismatch');
  }
  if (witnessId) await checkWitness(restarted, witnessId, report);
  return restarted;
}

export async function someAcknowledged(service: TestService, count: number, maxTokens: number): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < count; index++) {
    const answer = await api(service, '/v1/responses', { method: 'POST', json: { model: MODEL, input: `before ${index}`, background: true, max_output_tokens: maxTokens, seed: index, on_restart: POLICIES[index % 3] }, signal: AbortSignal.timeout(30_000) });
    if (answer.status !== 202) throw new Error(`create answered ${answer.status}: ${await answer.text()}`);
    ids.push(((await answer.json()) as ResponseObject).id);
  }
  return ids;
}

export function formatFault(report: FaultReport): string {
  const lines = [`${report.name}: ${report.method || 'not run'}`];
  for (const [name, count] of Object.entries(report.counts)) lines.push(`  ${name.padEnd(36)} ${count}`);
  if (Object.keys(report.counts).length === 0 && report.method) lines.push('  (no failures)');
  for (const line of report.skipped) lines.push(`  SKIPPED: ${line}`);
  for (const note of report.notes) lines.push(`  note: ${note}`);
  return lines.join('\n');
}

export function faultCountsClean(report: FaultReport): boolean {
  return Object.values(report.counts).every((count) => count === 0);
}
