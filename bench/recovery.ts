/**
 * Recovery: time from start to healthy with 100,000 unfinished tasks in the database, against
 * the same with an empty one (LMSP 11.3). Two mixes: a crash with a long queue (97% queued,
 * policies fail, retry and resume in turn, so a third of them fail with an event; 1% each
 * loading, running, cancelling), and a pessimistic one where 60% of the tasks were active.
 */
import { closeSync, copyFileSync, fsyncSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { RECOVERY, RESTART_POLICIES, statusAfterRecovery, UNFINISHED_STATUSES, wasInterrupted } from '../src/domain/tasks.js';
import { Store } from '../src/store/index.js';
import { changedAtRecoverySql } from '../src/store/sql.js';
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
export function populate(dataDir: string, count: number, mix: Mix): void {
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

/** `CASE WHEN <status and policy> THEN <value of that pair> ... END` over the recovery table. */
function byOutcome(value: (status: (typeof UNFINISHED_STATUSES)[number], policy: (typeof RESTART_POLICIES)[number]) => string | null): string {
  const arms: string[] = [];
  for (const status of UNFINISHED_STATUSES) {
    for (const policy of RESTART_POLICIES) {
      if (RECOVERY[policy][status] === 'unchanged') continue;
      const result = value(status, policy);
      if (result !== null) arms.push(`WHEN t.status = '${status}' AND t.on_restart = '${policy}' THEN ${result}`);
    }
  }
  return `CASE ${arms.join(' ')} END`;
}

/**
 * The floor: the same status changes and events as recovery, written by set-based SQL on a
 * connection of its own (WAL, synchronous FULL), no service: one INSERT ... SELECT builds each
 * changed task's event (the response object, with the text of its deltas), one UPDATE keeps the
 * final text on the response, one UPDATE moves the tasks, one commit. The rules come from the
 * domain's RECOVERY table, as the service's do. Milliseconds from opening to the commit.
 */
export function floorMs(file: string): number {
  settleDisk();
  const started = performance.now();
  const db = new BetterSqlite3(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  // As the service during recovery: no checkpoint on this connection (the maintenance worker does it later).
  db.pragma('wal_autocheckpoint = 0');
  const now = Math.floor(Date.now() / 1000);
  const changed = changedAtRecoverySql('t.');
  const to = byOutcome((status, policy) => `'${statusAfterRecovery(status, RECOVERY[policy][status])}'`);
  const eventType = byOutcome((status, policy) => {
    const outcome = RECOVERY[policy][status];
    return `'${outcome === 'requeued' ? 'response.queued' : outcome === 'resumed' ? 'response.resumed' : `response.${outcome}`}'`;
  });
  const interrupted = UNFINISHED_STATUSES.filter(wasInterrupted).map((status) => `t.status = '${status}'`).join(' OR ');
  const text = `coalesce((SELECT group_concat(CASE WHEN l.shape IS NULL THEN json_extract(l.data, '$.delta') ELSE l.data END, '')
    FROM task_log l WHERE l.task_id = t.id AND l.sequence_number > t.output_start_seq
      AND (l.shape IS NOT NULL OR l.type = 'response.output_text.delta')), '')`;
  db.transaction(() => {
    db.exec(`CREATE TEMP TABLE recovered AS SELECT t.id, t.response_id, ${to} AS next, ${eventType} AS type,
      CASE WHEN t.output_tokens = 0 THEN '' ELSE ${text} END AS text FROM tasks t WHERE ${changed}`);
    db.exec(`INSERT INTO task_log (task_id, sequence_number, created_at, type, data)
      SELECT t.id, t.last_sequence_number + 1, ${now}, x.type, json_object('response', json_object(
        'id', r.id, 'object', 'response', 'created_at', r.created_at,
        'status', CASE x.next WHEN 'queued' THEN 'queued' WHEN 'running' THEN 'in_progress' ELSE x.next END,
        'background', json(iif(r.background, 'true', 'false')), 'model', r.model, 'instructions', r.instructions,
        'previous_response_id', r.previous_response_id, 'max_output_tokens', r.max_output_tokens,
        'temperature', r.temperature, 'top_p', r.top_p, 'seed', r.seed, 'store', json(iif(r.store, 'true', 'false')),
        'metadata', json(r.metadata),
        'output', CASE WHEN t.started_at IS NULL THEN json('[]') ELSE json_array(json_object('type', 'message', 'id', r.output_item_id,
          'role', 'assistant', 'status', 'incomplete', 'content', json_array(json_object('type', 'output_text', 'text', x.text, 'annotations', json('[]'))))) END,
        'usage', NULL, 'error', CASE x.next WHEN 'failed' THEN json_object('code', 'server_restarted', 'message', 'the service restarted before the task finished') END,
        'incomplete_details', NULL,
        'task', json_object('id', t.id, 'status', x.next, 'on_restart', t.on_restart, 'attempt', t.attempt, 'last_sequence_number', t.last_sequence_number + 1)))
      FROM recovered x JOIN tasks t ON t.id = x.id JOIN responses r ON r.id = t.response_id`);
    db.exec(`UPDATE responses SET output_text = x.text FROM recovered x WHERE responses.id = x.response_id
      AND (x.next = 'failed' OR x.next = 'cancelled') AND x.text != ''`);
    db.exec(`UPDATE tasks AS t SET status = x.next, last_sequence_number = t.last_sequence_number + 1,
        restarts = t.restarts + (${interrupted}),
        finished_at = CASE WHEN x.next = 'failed' OR x.next = 'cancelled' THEN ${now} END,
        error_code = CASE x.next WHEN 'failed' THEN 'server_restarted' END,
        error_message = CASE x.next WHEN 'failed' THEN 'the service restarted before the task finished' END
      FROM recovered x WHERE t.id = x.id`);
  }).immediate();
  db.close();
  return performance.now() - started;
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
  const floor: number[] = [];
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
      const floorCopy = makeDataDir('bench-recovery-floor');
      copyDurably(join(template, 'lmsp.db'), join(floorCopy, 'lmsp.db'));
      floor.push(floorMs(join(floorCopy, 'lmsp.db')));
      rmSync(floorCopy, { recursive: true, force: true });
      log(`recovery run ${run + 1} (${mix}): ${full.at(-1)!.toFixed(0)} ms with ${TASKS} unfinished tasks, ${bare.at(-1)!.toFixed(0)} ms empty, floor ${floor.at(-1)!.toFixed(0)} ms (set-based SQL)`);
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
    extra: {
      difference_ms: Math.round(value - baseline),
      floor_ms: Math.round(median(floor)),
      floor_samples: floor.map((ms) => ms.toFixed(0)).join(' '),
      difference_to_floor: Number(((value - baseline) / median(floor)).toFixed(2)),
    },
  };
}

/** `BENCH_RECOVERY_MIX=active` measures one mix only. */
export async function benchRecovery(): Promise<Figure[]> {
  const only = process.env.BENCH_RECOVERY_MIX as Mix | undefined;
  const mixes: Mix[] = only ? [only] : ['queue', 'active'];
  const figures: Figure[] = [];
  for (const mix of mixes) figures.push(await measure(mix));
  return figures;
}
