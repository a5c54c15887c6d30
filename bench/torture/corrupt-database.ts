/**
 * The corrupt-database check: `lmsp serve` on a damaged database must refuse to start, soon and
 * with a clear message, and leave the file as it was.
 */
import BetterSqlite3 from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { closeSync, cpSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { runCli } from '../../test/helpers/cli.js';
import { makeDataDir } from '../../test/helpers/data-dir.js';
import { drain } from './checks.js';
import { countFault, newFault, someAcknowledged, type FaultReport } from './faults.js';
import { startWithRetry } from './processes.js';
import { Random } from './random.js';

function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** A data directory whose database has enough pages for damage in the middle to hit real data. */
async function databaseToCorrupt(): Promise<string> {
  const service = await startWithRetry({ dataDir: makeDataDir('corrupt-source') });
  try {
    await someAcknowledged(service, 40, 200);
    await drain(service, 60_000);
  } finally {
    await service.stop();
  }
  // Everything in the main file: damage to it must not hide behind newer pages in the WAL.
  const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'));
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  return service.dataDir;
}

/**
 * A corrupt database (LMSP 11, project decisions): a few KB overwritten in the middle, and
 * separately the first 100 bytes. `lmsp serve` must exit non-zero soon, say why on stderr, and
 * leave the file's bytes as they were.
 */
export async function runCorruptDatabaseCheck(log: (line: string) => void = () => {}, sourceDataDir?: string): Promise<FaultReport> {
  const report = newFault('corrupt database');
  report.method = 'bytes overwritten with random data while the service is down';
  const source = sourceDataDir ?? (await databaseToCorrupt());
  const random = new Random(7);
  const cases: Array<{ name: string; damage: (path: string) => void }> = [
    {
      name: 'middle',
      damage: (path) => {
        // Three whole pages from a page boundary in the middle: headers and cells both go.
        const pageSize = 4096;
        const offset = Math.floor(statSync(path).size / 2 / pageSize) * pageSize;
        overwrite(path, offset, randomBytes(random, 3 * pageSize));
      },
    },
    { name: 'first 100 bytes', damage: (path) => overwrite(path, 0, randomBytes(random, 100)) },
  ];
  try {
    for (const { name, damage } of cases) {
      const dataDir = makeDataDir(`corrupt-${name}`);
      try {
        cpSync(source, dataDir, { recursive: true });
        rmSync(join(dataDir, 'service.json'), { force: true });
        const path = join(dataDir, 'lmsp.db');
        damage(path);
        const before = sha256File(path);
        const started = Date.now();
        const result = await runCli(['serve', '--data-dir', dataDir, '--port', '0'], { timeoutMs: 30_000 }).catch((error: Error) => ({ code: null, stdout: '', stderr: error.message }));
        const seconds = (Date.now() - started) / 1000;
        const message = result.stderr.trim().replace(/\s*\n\s*/g, ' | ');
        report.notes.push(`${name}: exit ${result.code} after ${seconds.toFixed(1)} s: ${message.slice(0, 200)}`);
        if (result.code === 0 || result.code === null) countFault(report, 'started_or_hung');
        if (seconds > 15) countFault(report, 'slow_exit');
        if (!/corrupt|not an sqlite database|malformed/i.test(result.stderr)) countFault(report, 'unclear_message');
        if (sha256File(path) !== before) countFault(report, 'file_modified');
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
  } finally {
    if (!sourceDataDir) rmSync(source, { recursive: true, force: true });
  }
  for (const note of report.notes) log(`corrupt database: ${note}`);
  return report;
}

function randomBytes(random: Random, length: number): Buffer {
  return Buffer.from(Array.from({ length }, () => random.int(0, 255)));
}

function overwrite(path: string, offset: number, bytes: Buffer): void {
  const fd = openSync(path, 'r+');
  try {
    writeSync(fd, bytes, 0, bytes.length, offset);
  } finally {
    closeSync(fd);
  }
}
