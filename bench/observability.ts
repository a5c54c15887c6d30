/**
 * What being observable costs (LMSP 12 and 15):
 * - task logs: background creates per second with every status change logged at info level (the
 *   default) against the same service logging warnings only; metrics are collected in both;
 * - a scrape of /metrics (which counts stored tasks with one grouped query) with 100,000 stored
 *   tasks, against an ordinary request on the same service (a page of GET /v1/tasks).
 */
import autocannon from 'autocannon';
import { Store } from '../src/store/index.js';
import { makeDataDir } from '../test/helpers/data-dir.js';
import { insertResponseTask, makeResponseAndTask } from '../test/helpers/fixtures.js';
import { log, median, runs, startService, type Figure } from './lib.js';

const CONNECTIONS = 32;
const DURATION_S = 5;
const BODY = JSON.stringify({ model: 'lmsp-tiny', input: 'Write a haiku about durable storage.', background: true, max_output_tokens: 16 });
const STORED_TASKS = 100_000;
const SCRAPES = 30;
/** Loads never finish: created tasks stay queued instead of competing for the CPU. */
const NO_RUNS = { LMSP_DEBUG_LOAD_DELAY_MS: '3600000' };

async function createsPerSecond(logLevel: string): Promise<number> {
  const service = await startService({ env: { ...NO_RUNS, LMSP_LOG_LEVEL: logLevel, LMSP_LOG_FORMAT: 'json' } });
  try {
    const load = () => autocannon({
      url: `${service.url}/v1/responses`, method: 'POST', connections: CONNECTIONS, duration: DURATION_S,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${service.token}` }, body: BODY,
    });
    await load();
    const result = await load();
    if (result.non2xx + result.errors > 0) throw new Error(`${result.non2xx + result.errors} creates failed`);
    return result.requests.average;
  } finally {
    await service.kill();
  }
}

/** A data directory with STORED_TASKS tasks, one in ten queued, the rest completed. */
function populate(): string {
  const dataDir = makeDataDir('bench-scrape');
  const store = Store.open(dataDir);
  for (let done = 0; done < STORED_TASKS; done += 1000) {
    store.db.transaction((context) => {
      for (let i = 0; i < 1000; i++) {
        const { response, task } = makeResponseAndTask({ clientId: 'cli_bench' });
        insertResponseTask(store, context, response, task);
      }
    });
  }
  store.db.sqlite.prepare("UPDATE tasks SET status = 'completed', finished_at = created_at WHERE seq % 10 <> 0").run();
  store.db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
  store.db.sqlite.close();
  return dataDir;
}

async function timed(url: string, token: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  await response.text();
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}`);
  return performance.now() - started;
}

export async function benchObservability(): Promise<Figure[]> {
  const logged: number[] = [];
  const quiet: number[] = [];
  for (let run = 0; run < runs(); run++) {
    quiet.push(await createsPerSecond('warn'));
    logged.push(await createsPerSecond('info'));
    log(`observability run ${run + 1}: creates with task logs ${logged.at(-1)!.toFixed(0)}/s, without ${quiet.at(-1)!.toFixed(0)}/s`);
  }

  log(`storing ${STORED_TASKS} tasks`);
  const dataDir = populate();
  const service = await startService({ dataDir, env: { ...NO_RUNS, LMSP_LOG_LEVEL: 'warn' } });
  const scrapes: number[] = [];
  const pages: number[] = [];
  try {
    await timed(`${service.url}/metrics`, service.token);
    for (let i = 0; i < SCRAPES; i++) {
      scrapes.push(await timed(`${service.url}/metrics`, service.token));
      pages.push(await timed(`${service.url}/v1/tasks?limit=20`, service.token));
    }
  } finally {
    await service.kill();
  }
  const scrape = median(scrapes);
  const page = median(pages);
  return [
    {
      name: 'Creates with every status change logged (202/s)',
      value: median(logged),
      baseline: median(quiet),
      unit: 'req/s',
      ratio: median(logged) / median(quiet),
      target: '>= 0.9',
      met: median(logged) / median(quiet) >= 0.9,
      how: `autocannon, ${CONNECTIONS} connections, ${DURATION_S} s after a warm-up; LMSP_LOG_LEVEL=info (a JSON line per status change) vs warn, metrics collected in both`,
      samples: { value: logged, baseline: quiet },
    },
    {
      name: `Scrape of /metrics with ${STORED_TASKS.toLocaleString('en')} tasks (ms)`,
      value: scrape,
      baseline: page,
      unit: 'ms',
      ratio: scrape / page,
      target: '< 100 ms',
      met: scrape < 100,
      how: `median of ${SCRAPES} sequential scrapes against GET /v1/tasks?limit=20 on the same service, ${STORED_TASKS} stored tasks (one in ten queued)`,
      samples: { value: scrapes, baseline: pages },
    },
  ];
}
