/**
 * Sweep: p99 latency of GET /v1/tasks/{id} while the retention sweeper deletes 1,000,000 events,
 * against the same load with nothing to sweep.
 */
import { join } from 'node:path';
import autocannon from 'autocannon';
import BetterSqlite3 from 'better-sqlite3';
import { Store } from '../src/store/index.js';
import { makeDataDir } from '../test/helpers/data-dir.js';
import { insertResponseTask, machineOf, makeResponseAndTask } from '../test/helpers/fixtures.js';
import { log, median, runs, startService, type Figure } from './lib.js';

const TASKS = 1000;
const EVENTS_PER_TASK = 1000;

/** Finished tasks with a thousand events each (a long generation's deltas), written directly. */
function populate(dataDir: string): { probeId: string; taskIds: string[] } {
  const store = Store.open(dataDir);
  const taskIds: string[] = [];
  const setLast = store.db.sqlite.prepare('UPDATE tasks SET last_sequence_number = ? WHERE id = ?');
  // Stored as the service stores deltas (compactly, src/store/events.ts).
  const delta = { item_id: 'msg_x', output_index: 0, content_index: 0, delta: 'word ', logprobs: [] };
  const tokens = [0, 0];
  for (let i = 0; i <= TASKS; i++) {
    store.db.transaction((context) => {
      const { response, task } = makeResponseAndTask({ clientId: 'cli_bench' });
      insertResponseTask(store, context, response, task);
      machineOf(store).startRunning(context, task.id);
      machineOf(store).complete(context, task.id, 'max_output_tokens');
      if (i === TASKS) return; // the probe: recent, small, never swept
      const first = store.tasks.get(task.id)!.lastSequenceNumber;
      for (let n = 1; n <= EVENTS_PER_TASK; n++) store.events.append(task.id, first + n, 'response.output_text.delta', 1, delta, tokens);
      setLast.run(first + EVENTS_PER_TASK, task.id);
      taskIds.push(task.id);
    });
  }
  const probe = store.tasks.list({ clientId: null, statuses: null, afterSeq: null, limit: 1, order: 'desc' }).tasks[0]!;
  store.db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
  store.db.sqlite.close();
  return { probeId: probe.id, taskIds };
}

/** Tasks not swept yet (cheap to count through the finished-tasks index, unlike their events). */
function oldTasksLeft(dataDir: string, before: number): number {
  const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM tasks WHERE finished_at < ?').get(before) as { n: number }).n;
  } finally {
    db.close();
  }
}

/** GETs the probe task with 16 connections until `done()` says so, and returns the p99 in ms. */
async function p99While(url: string, token: string, probeId: string, done: () => boolean | Promise<boolean>, maxSeconds: number): Promise<number> {
  let resolveResult: (result: autocannon.Result) => void = () => {};
  const finished = new Promise<autocannon.Result>((resolve) => (resolveResult = resolve));
  const instance = autocannon({
    url: `${url}/v1/tasks/${probeId}`, connections: 16, duration: maxSeconds, headers: { authorization: `Bearer ${token}` },
  }, (error, result) => {
    if (error) throw error;
    resolveResult(result);
  });
  const poll = setInterval(async () => {
    if (await done()) instance.stop();
  }, 250);
  const result = await finished;
  clearInterval(poll);
  if (result.non2xx > 0) throw new Error(`${result.non2xx} GETs failed`);
  return result.latency.p99;
}

export async function benchSweep(): Promise<Figure> {
  const swept: number[] = [];
  const quiet: number[] = [];
  const durations: number[] = [];
  for (let run = 0; run < runs(); run++) {
    const dataDir = makeDataDir('bench-sweep');
    await (await startService({ dataDir, env: { LMSP_LOG_LEVEL: 'warn' } })).stop();
    log(`writing ${TASKS * EVENTS_PER_TASK} events`);
    const { probeId, taskIds } = populate(dataDir);
    const service = await startService({ dataDir, args: ['--retention', '1h', '--sweep-interval', '1s'], env: { LMSP_LOG_LEVEL: 'warn' } });
    try {
      const started = performance.now();
      quiet.push(await p99While(service.url, service.token, probeId, () => performance.now() - started > 5000, 10));
      // Make the tasks old: the next sweep deletes their million events, a thousand rows a transaction.
      const db = new BetterSqlite3(join(dataDir, 'lmsp.db'));
      db.pragma('busy_timeout = 10000');
      const old = Math.floor(Date.now() / 1000) - 2 * 3600;
      const backDate = db.prepare('UPDATE tasks SET finished_at = ? WHERE id = ?');
      db.transaction(() => taskIds.forEach((id) => backDate.run(old, id)))();
      db.close();
      const sweepStarted = performance.now();
      swept.push(await p99While(service.url, service.token, probeId, () => oldTasksLeft(dataDir, old + 1) === 0, 300));
      durations.push(performance.now() - sweepStarted);
      log(`sweep run ${run + 1}: p99 ${swept.at(-1)} ms while sweeping (${(durations.at(-1)! / 1000).toFixed(1)} s), ${quiet.at(-1)} ms without`);
    } finally {
      await service.kill();
    }
  }
  const value = median(swept);
  const baseline = median(quiet);
  return {
    name: 'GET /v1/tasks/{id} p99 while sweeping 1,000,000 events',
    value,
    baseline,
    unit: 'ms',
    ratio: value / baseline,
    target: '<= 2x',
    met: value / baseline <= 2,
    how: 'autocannon, 16 connections, for as long as the sweep runs vs 5 s with nothing to sweep',
    samples: { value: swept, baseline: quiet },
    extra: { sweep_seconds: Math.round(median(durations) / 100) / 10 },
  };
}
