/**
 * One service per data directory. The lock is an exclusive lock on a small SQLite file, held for
 * the life of the process: the operating system drops it when the process dies, even by SIGKILL,
 * so a crash never leaves a stale lock behind.
 */
import BetterSqlite3 from 'better-sqlite3';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { assertPrivateDataDir, DatabaseOpenError, EXIT_DATABASE_UNAVAILABLE, unusableDataDir } from './db.js';

export const LOCK_FILE = 'lmsp.lock';
/**
 * A starting service waits this long for the lock: long enough that a CLI's brief probe
 * (`isDataDirLocked`) never makes it fail, short enough to report a second service at once.
 */
const LOCK_WAIT_MS = 1500;

export interface DataDirLock {
  release(): void;
}

/** Takes the data directory's lock, creating the directory (mode 0700) if it does not exist yet. */
export function lockDataDir(dataDir: string): DataDirLock {
  const path = join(dataDir, LOCK_FILE);
  assertPrivateDataDir(dataDir);
  let db: BetterSqlite3.Database;
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    db = new BetterSqlite3(path, { timeout: LOCK_WAIT_MS });
  } catch (error) {
    throw unusableDataDir(dataDir, error);
  }
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER); DELETE FROM holder;');
    db.prepare('INSERT INTO holder (pid) VALUES (?)').run(process.pid);
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code?.startsWith('SQLITE_BUSY')) {
      throw new DatabaseOpenError(`another lmsp process holds the data directory ${dataDir} (a service, or a command such as lmsp models pull run without one); stop it, or choose another with --data-dir`,
        EXIT_DATABASE_UNAVAILABLE);
    }
    throw unusableDataDir(dataDir, error);
  }
  return { release: () => db.close() };
}

/**
 * Whether a service holds the data directory's lock now. The probe takes a shared lock for an
 * instant: a service that holds the lock refuses it at once.
 */
export function isDataDirLocked(dataDir: string): boolean {
  const path = join(dataDir, LOCK_FILE);
  if (!existsSync(path)) return false;
  let db: BetterSqlite3.Database | null = null;
  try {
    db = new BetterSqlite3(path, { readonly: true, fileMustExist: true, timeout: 0 });
    db.prepare('SELECT count(*) FROM holder').get();
    return false;
  } catch (error) {
    return (error as { code?: string }).code?.startsWith('SQLITE_BUSY') ?? false;
  } finally {
    db?.close();
  }
}
