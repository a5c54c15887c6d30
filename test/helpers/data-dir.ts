/** A fresh data directory per test, removed on success and kept (with its path printed) on failure. */
import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Database } from '../../src/store/db.js';

export function makeDataDir(label = 'test'): string {
  return mkdtempSync(join(tmpdir(), `lmsp-${label.replace(/[^a-z0-9]+/gi, '-').slice(0, 40)}-`));
}

export async function withDataDir<T>(run: (dataDir: string) => Promise<T> | T, label?: string): Promise<T> {
  const dataDir = makeDataDir(label);
  try {
    const result = await run(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
    return result;
  } catch (error) {
    console.error(`# data directory kept for inspection: ${dataDir}`);
    throw error;
  }
}

/**
 * Makes `dataDir`'s database corrupt: an lmsp database with a filler table, checkpointed, then
 * scribbled over in the middle (b-tree pages of the filler). Returns the database file's path.
 */
export function writeCorruptDatabase(dataDir: string): string {
  const db = Database.open(dataDir);
  db.sqlite.exec('CREATE TABLE filler (x TEXT)');
  const insert = db.sqlite.prepare('INSERT INTO filler VALUES (?)');
  for (let i = 0; i < 2000; i++) insert.run('x'.repeat(200));
  db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
  db.sqlite.close();
  const path = join(dataDir, 'lmsp.db');
  const size = statSync(path).size;
  const fd = openSync(path, 'r+');
  for (let offset = 8192; offset < size; offset += 4096 * 7) writeSync(fd, Buffer.alloc(512, 0xa5), 0, 512, offset + 100);
  closeSync(fd);
  return path;
}
