/**
 * Durable creates: background creates answered 202 per second by lmsp (synchronous = FULL, each
 * answered only after the commit that holds its task), against a bare Fastify route that parses
 * the same JSON and answers without storing. Both are loaded the same way by autocannon with
 * many concurrent connections over HTTP, one after the other, several times.
 */
import autocannon from 'autocannon';
import { firstJsonLine, log, median, runs, spawnScript, startService, stopChild, type Figure } from './lib.js';

const CONNECTIONS = 32;
const DURATION_S = 5;
const BODY = JSON.stringify({ model: 'lmsp-tiny', input: 'Write a haiku about durable storage.', background: true, max_output_tokens: 16 });

async function load(url: string, token: string | null): Promise<{ rate: number; non2xx: number }> {
  const result = await autocannon({
    url: `${url}/v1/responses`,
    method: 'POST',
    connections: CONNECTIONS,
    duration: DURATION_S,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: BODY,
  });
  return { rate: result.requests.average, non2xx: result.non2xx + result.errors };
}

export async function benchCreates(): Promise<Figure> {
  const durable: number[] = [];
  const bare: number[] = [];
  for (let run = 0; run < runs(); run++) {
    const baseline = spawnScript('bare-server');
    const { url } = await firstJsonLine<{ url: string }>(baseline);
    await load(url, null); // warm-up
    const bareResult = await load(url, null);
    await stopChild(baseline);
    bare.push(bareResult.rate);

    // The tasks must not run during the measurement (they would compete for the CPU): the model
    // load never finishes, so they stay queued, durable on disk.
    const service = await startService({ env: { LMSP_DEBUG_LOAD_DELAY_MS: '3600000', LMSP_LOG_LEVEL: 'warn' } });
    await load(service.url, service.token);
    const result = await load(service.url, service.token);
    await service.kill();
    if (result.non2xx > 0) throw new Error(`${result.non2xx} creates were not answered 202`);
    durable.push(result.rate);
    log(`creates run ${run + 1}: durable ${result.rate.toFixed(0)}/s, bare ${bareResult.rate.toFixed(0)}/s`);
  }
  const value = median(durable);
  const baseline = median(bare);
  return {
    name: 'Durable creates (202/s)',
    value,
    baseline,
    unit: 'req/s',
    ratio: value / baseline,
    target: '>= 0.5',
    met: value / baseline >= 0.5,
    how: `autocannon, ${CONNECTIONS} connections, ${DURATION_S} s after a ${DURATION_S} s warm-up; lmsp with synchronous = FULL vs a bare Fastify route`,
    samples: { value: durable, baseline: bare },
  };
}
