/**
 * Storage per generated token: the database and its WAL, after a checkpoint, grown by one long
 * generation of `lmsp-tiny` (whose text is about one byte a token), divided by its tokens. Where
 * the bytes go is read from SQLite's `dbstat` table (payload bytes of each table and index).
 */
import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { makeDataDir } from '../test/helpers/data-dir.js';
import { waitFor } from '../test/helpers/service.js';
import { log, median, runs, startService, type Figure } from './lib.js';

const TOKENS = 4000;
/**
 * Output is committed at most every 20 ms, so the number of delta events depends on the speed of
 * the machine; 5 ms a token fixes it at about 4 tokens a delta (about 1,000 delta events), what a
 * client sees from a model generating 200 tokens/s.
 */
const TOKEN_DELAY_MS = 5;
const SERVICE_ENV = { LMSP_LOG_LEVEL: 'warn', LMSP_DEBUG_TOKEN_DELAY_MS: String(TOKEN_DELAY_MS) };
const REQUEST = { model: 'lmsp-tiny', input: 'Tell me a very long story.', max_output_tokens: TOKENS, seed: 99, temperature: 1 };

interface Footprint {
  bytes: number;
  /** Payload bytes per table or index, from `dbstat`. */
  objects: Record<string, number>;
  deltas: number;
}

/** Checkpoints the WAL into the database (TRUNCATE), then sizes both files. The service is stopped. */
function footprint(dataDir: string): Footprint {
  const file = join(dataDir, 'lmsp.db');
  const db = new BetterSqlite3(file);
  try {
    db.pragma('wal_checkpoint(TRUNCATE)');
    const objects: Record<string, number> = {};
    for (const row of db.prepare('SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name').all() as Array<{ name: string; bytes: number }>) {
      objects[row.name] = row.bytes;
    }
    const wal = (() => {
      try {
        return statSync(`${file}-wal`).size;
      } catch {
        return 0;
      }
    })();
    const deltas = (db.prepare('SELECT coalesce(sum(last_sequence_number), 0) AS n FROM tasks').get() as { n: number }).n;
    return { bytes: statSync(file).size + wal, objects, deltas };
  } finally {
    db.close();
  }
}

export async function benchStorage(): Promise<Figure> {
  const samples: number[] = [];
  let where: Record<string, number> = {};
  let tokens = 0;
  let deltas = 0;
  for (let run = 0; run < runs(); run++) {
    const dataDir = makeDataDir('bench-storage');
    const first = await startService({ dataDir, env: SERVICE_ENV });
    await first.stop();
    const before = footprint(dataDir);
    const service = await startService({ dataDir, env: SERVICE_ENV });
    const created = await service.client.createResponse({ ...REQUEST, background: true });
    const done = await waitFor(async () => {
      const response = await service.client.getResponse(created.body.id);
      return response.task.status === 'completed' ? response : null;
    }, { timeoutMs: 300_000, intervalMs: 100, what: 'the generation to finish' });
    await service.stop();
    const after = footprint(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
    tokens = done.usage?.output_tokens ?? 0;
    deltas = after.deltas;
    samples.push((after.bytes - before.bytes) / tokens);
    where = Object.fromEntries(Object.entries(after.objects)
      .map(([name, bytes]) => [name, bytes - (before.objects[name] ?? 0)] as const)
      .filter(([, bytes]) => bytes !== 0)
      .map(([name, bytes]) => [`${name}_per_token`, Number((bytes / tokens).toFixed(1))]));
    log(`storage run ${run + 1}: ${tokens} tokens in ${deltas} events, ${samples.at(-1)!.toFixed(1)} bytes a token; ${JSON.stringify(where)}`);
  }
  const value = median(samples);
  return {
    name: 'Storage per generated token (bytes)',
    value,
    baseline: 0,
    unit: 'B',
    ratio: value,
    target: '<= 40 B',
    met: value <= 40,
    how: `one ${TOKENS}-token generation of lmsp-tiny (background, seed ${REQUEST.seed}, ${TOKEN_DELAY_MS} ms a token); growth of the database and its WAL after \`wal_checkpoint(TRUNCATE)\`, service stopped, divided by the tokens; per table and index from \`dbstat\``,
    samples: { value: samples, baseline: [] },
    extra: { tokens, events: deltas, ...where },
  };
}
