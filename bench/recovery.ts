/**
 * Recovery: time from start to healthy with 100,000 unfinished tasks in the database, against
 * the same with an empty one (LMSP 11.3). Two mixes: a crash with a long queue (97% queued,
 * policies fail, retry and resume in turn, so a third of them fail with an event; 1% each
 * loading, running, cancelling), and a pessimistic one where 60% of the tasks were active.
 */
import { closeSync, copyFileSync, fsyncSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { RESTART_POLICIES } from '../src/domain/tasks.js';
import { Store } from '../src/store/index.js';
import { makeDataDir } from '../test/helpers/data-dir.js';
import { insertResponseTask, machineOf, makeResponseAndTask } from '../test/helpers/fixtures.js';
import { log, median, runs, settleDisk, startService, type Figure } from './lib.js';

const TASKS = 100_000;
const BATCH = 1000;

type Mix = 'queue' | 'active';

/** The state a task is left in: 0 queued, 1 loading, 2 running, 3 cancelling. */
function stateFor(mix: Mix, index: number): number {
  if (mix === 'active') return [0, 0, 0, 0, 1, 1, 2, 2, 2, 3][index % 10]!;
  const slot = index % 100;
  return slot < 97 ? 0 : slot - 96;
}

/** Fills a data directory's database with unfinished tasks, written as the service writes them. */
function populate(dataDir: string, count: number, mix: Mix): void {
  const store = Store.open(dataDir);
  for (let start = 0; start < count; start += BATCH) {
    store.db.transaction((context) => {
      for (let i = start; i < Math.min(count, start + BATCH); i++) {
        const { response, task } = makeResponseAndTask({ onRestart: RESTART_POLICIES[i % 3]!, clientId: 'cli_bench' });
        const created = insertResponseTask(store, context, response, task);
        const state = stateFor(mix, i);
        if (state === 0) continue;
        machineOf(store).startLoading(context, created.id);
        if (state === 1) continue;
        machineOf(store).startRunning(context, created.id);
        machineOf(store).appendOutput(context, created.id, [{ text: 'abc ', tokens: [1, 2, 3, 4] }]);
        if (state === 3) machineOf(store).cancel(context, created.id);
      }
    });
  }
  store.db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
  store.db.sqlite.close();
}

/** Copies a file and makes the copy durable, so that its write-back does not land in the timing. */
function copyDurably(from: string, to: string): void {
  copyFileSync(from, to);
  const fd = openSync(to, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

async function timeToHealthy(dataDir: string): Promise<number> {
  settleDisk();
  const started = performance.now();
  const service = await startService({ dataDir, env: { LMSP_LOG_LEVEL: 'warn' }, timeoutMs: 120_000 });
  const elapsed = performance.now() - started;
  await service.kill();
  return elapsed;
}

async function measure(mix: Mix): Promise<Figure> {
  const template = makeDataDir('bench-recovery');
  // The first start writes lmsp-tiny and registers it; measured starts are not first starts.
  await (await startService({ dataDir: template, env: { LMSP_LOG_LEVEL: 'warn' } })).stop();
  const empty = makeDataDir('bench-empty');
  copyDurably(join(template, 'lmsp.db'), join(empty, 'lmsp.db'));
  mkdirSync(join(empty, 'models'));
  copyFileSync(join(template, 'models', 'lmsp-tiny.gguf'), join(empty, 'models', 'lmsp-tiny.gguf'));
  log(`writing ${TASKS} unfinished tasks (${mix} mix)`);
  populate(template, TASKS, mix);
  const full: number[] = [];
  const bare: number[] = [];
  try {
    for (let run = 0; run < runs(); run++) {
      // Each run recovers a fresh copy: recovery changes the database.
      const copy = makeDataDir('bench-recovery-run');
      copyDurably(join(template, 'lmsp.db'), join(copy, 'lmsp.db'));
      mkdirSync(join(copy, 'models'));
      copyFileSync(join(template, 'models', 'lmsp-tiny.gguf'), join(copy, 'models', 'lmsp-tiny.gguf'));
      full.push(await timeToHealthy(copy));
      rmSync(copy, { recursive: true, force: true });
      bare.push(await timeToHealthy(empty));
      log(`recovery run ${run + 1} (${mix}): ${full.at(-1)!.toFixed(0)} ms with ${TASKS} unfinished tasks, ${bare.at(-1)!.toFixed(0)} ms empty`);
    }
  } finally {
    rmSync(template, { recursive: true, force: true });
    rmSync(empty, { recursive: true, force: true });
  }
  const value = median(full);
  const baseline = median(bare);
  return {
    name: `Recovery to healthy, ${TASKS.toLocaleString('en')} unfinished tasks (${mix === 'queue' ? 'a long queue' : '60% active'})`,
    value,
    baseline,
    unit: 'ms',
    ratio: value / baseline,
    target: '<= 2 s more than empty',
    met: value - baseline <= 2000,
    how: mix === 'queue'
      ? 'from spawning `lmsp serve` to its first healthy answer; 97% queued (policies in turn, so a third fail with an event), 1% each loading, running and cancelling'
      : 'the same with 40% queued, 20% loading, 30% running and 10% cancelling: about 70% of the tasks change state with an event',
    samples: { value: full, baseline: bare },
    extra: { difference_ms: Math.round(value - baseline) },
  };
}

export async function benchRecovery(): Promise<Figure[]> {
  return [await measure('queue'), await measure('active')];
}
