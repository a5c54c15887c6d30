/**
 * One service per data directory. The lock is an exclusive lock on a small SQLite file, held for
 * the life of the process: the operating system drops it when the process dies, even by SIGKILL,
 * so a crash never leaves a stale lock behind.
 */
import BetterSqlite3 from 'better-sqlite3';
import { join } from 'node:path';
import { DatabaseOpenError, EXIT_DATABASE_UNAVAILABLE } from './db.js';

export const LOCK_FILE = 'lmsp.lock';

export interface DataDirLock {
  release(): void;
}

export function lockDataDir(dataDir: string): DataDirLock {
  const path = join(dataDir, LOCK_FILE);
  const db = new BetterSqlite3(path, { timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER); DELETE FROM holder;');
    db.prepare('INSERT INTO holder (pid) VALUES (?)').run(process.pid);
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code?.startsWith('SQLITE_BUSY')) {
      throw new DatabaseOpenError(`another lmsp service is already running with the data directory ${dataDir}`, EXIT_DATABASE_UNAVAILABLE);
    }
    throw error;
  }
  return { release: () => db.close() };
}
