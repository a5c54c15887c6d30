/**
 * Resume: after SIGKILL mid-generation, the time from restarting the service to the first new
 * token of the resumed task, against a cold start of the same request (start the service, send
 * it, first token). Both include starting the process and loading the model.
 */
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { writeGgufFile } from '../src/engine/gguf-writer.js';
import { BENCH_MODEL, buildSyntheticModel } from '../src/engine/synthetic-model.js';
import { api, waitFor } from '../test/helpers/service.js';
import { readSse } from '../test/helpers/sse.js';
import { makeDataDir } from '../test/helpers/data-dir.js';
import { log, median, runs, startService, type Figure } from './lib.js';

const REQUEST = { model: 'bench', input: 'Tell me a very long story.', max_output_tokens: 1000, seed: 77, temperature: 1 };
const KILL_AFTER_TOKENS = 200;

function lastSequenceOnDisk(dataDir: string, taskId: string): number {
  const db = new BetterSqlite3(join(dataDir, 'lmsp.db'), { readonly: true });
  try {
    return (db.prepare('SELECT last_sequence_number AS n FROM tasks WHERE id = ?').get(taskId) as { n: number }).n;
  } finally {
    db.close();
  }
}

/**
 * Time from spawning the service to the first token the stream opened by `start` delivers.
 * Every task is then cancelled, so that the next start has nothing left to resume.
 */
async function untilFirstToken(dataDir: string, start: (url: string, token: string) => Promise<Response>): Promise<number> {
  const started = performance.now();
  const service = await startService({ dataDir, env: { LMSP_LOG_LEVEL: 'warn' } });
  try {
    const response = await start(service.url, service.token);
    for await (const frame of readSse(response)) {
      if (frame.event === 'response.output_text.delta') return performance.now() - started;
    }
    throw new Error('the stream ended without a token');
  } finally {
    for (const task of (await service.client.listTasks({ status: ['queued', 'loading', 'running'] })).data) {
      await service.client.cancelTask(task.id);
    }
    await service.stop();
  }
}

export async function benchResume(): Promise<Figure> {
  const dataDir = makeDataDir('bench-resume');
  const setup = await startService({ dataDir, env: { LMSP_LOG_LEVEL: 'warn' } });
  writeGgufFile(join(dataDir, 'models', 'bench.gguf'), buildSyntheticModel(BENCH_MODEL));
  await api(setup, '/v1/models', { method: 'POST', json: { path: 'bench.gguf', id: 'bench' } });
  await setup.stop();
  const resumed: number[] = [];
  const cold: number[] = [];
  for (let run = 0; run < runs(); run++) {
    // Run a generation and kill the service in the middle of it.
    const service = await startService({ dataDir, env: { LMSP_LOG_LEVEL: 'warn' } });
    const created = await service.client.createResponse({ ...REQUEST, background: true, on_restart: 'resume' });
    await waitFor(async () => ((await service.client.getResponse(created.body.id)).usage?.output_tokens ?? 0) >= KILL_AFTER_TOKENS, { intervalMs: 5 });
    await service.kill();
    const after = lastSequenceOnDisk(dataDir, created.body.task.id);
    resumed.push(await untilFirstToken(dataDir, (url, token) => fetch(`${url}/v1/tasks/${created.body.task.id}/events?stream=true&starting_after=${after}`, {
      headers: { authorization: `Bearer ${token}` },
    })));
    cold.push(await untilFirstToken(dataDir, (url, token) => fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...REQUEST, stream: true }),
    })));
    log(`resume run ${run + 1}: resumed after ${resumed.at(-1)!.toFixed(0)} ms, cold ${cold.at(-1)!.toFixed(0)} ms`);
  }
  const value = median(resumed);
  const baseline = median(cold);
  return {
    name: 'Resume: restart to first new token',
    value,
    baseline,
    unit: 'ms',
    ratio: value / baseline,
    target: '<= 1.2x',
    met: value / baseline <= 1.2,
    how: `killed after ${KILL_AFTER_TOKENS} of ${REQUEST.max_output_tokens} tokens on the ${BENCH_MODEL.embedding}x${BENCH_MODEL.layers} ${BENCH_MODEL.tensorType} model; both from spawning \`lmsp serve\`, model load included`,
    samples: { value: resumed, baseline: cold },
  };
}
