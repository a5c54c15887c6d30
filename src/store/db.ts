/**
 * The database: opening it safely, migrating it, and the two ways of writing to it.
 *
 * - `transaction(work)`: one `BEGIN IMMEDIATE` transaction, run now (startup, CLI, sweeper).
 * - `write(work)`: group commit. Writes that arrive in the same turn of the event loop run in one
 *   transaction, each inside its own savepoint, and each caller is answered only after the
 *   COMMIT. With `synchronous = FULL` a commit costs an fsync, so sharing it is what lets many
 *   concurrent clients get durable 202s quickly, without weakening durability.
 *
 * LMSP 11 project decisions: WAL, `synchronous = FULL` (a 202 survives power loss, not only a
 * crash), versioned migrations, file mode 0600, and a database that is corrupt, newer than this
 * code or not a database at all is refused with a clear error and never overwritten.
 */
import BetterSqlite3 from 'better-sqlite3';
import { accessSync, chmodSync, closeSync, constants as fsConstants, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, statfsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { isStorageUnavailable, ServiceError } from '../domain/errors.js';
import { packagePath } from '../paths.js';
import { packedFromFixedWidth } from './token-codec.js';

export type Sqlite = BetterSqlite3.Database;

export const DATABASE_FILE = 'lmsp.db';
export const BUSY_TIMEOUT_MS = 5000;
/** The write-ahead log is cut back to this size whenever it starts over (`journal_size_limit`). */
export const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;
const SQLITE_HEADER = 'SQLite format 3\u0000';

/** Why the database cannot be opened; the CLI prints the message and exits non-zero. */
export class DatabaseOpenError extends Error {
  override name = 'DatabaseOpenError';
  constructor(message: string, readonly exitCode: number, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** `PRAGMA auto_vacuum` of a database whose free pages `incremental_vacuum` releases. */
const AUTO_VACUUM_INCREMENTAL = 2;

/** Exit codes for a database we refuse to use (EX_DATAERR and friends from sysexits.h). */
export const EXIT_DATABASE_NOT_USABLE = 65;
export const EXIT_DATABASE_TOO_NEW = 75;
export const EXIT_DATABASE_UNAVAILABLE = 74;

/** A data directory that cannot be created or written: the reason, and what to do about it. */
export function unusableDataDir(dataDir: string, error: unknown): DatabaseOpenError {
  const full = diskFull(`the data directory ${dataDir}`, dataDir, error);
  if (full) return full;
  return new DatabaseOpenError(
    `cannot use the data directory ${dataDir}: ${(error as Error).message}; it must be a folder this user can write (choose another with --data-dir or LMSP_DATA_DIR)`,
    EXIT_DATABASE_UNAVAILABLE, { cause: error });
}

/**
 * The error SQLite gave: a write made in a transaction comes as the 503 it would be for a request
 * (`storage_unavailable`), with SQLite's error as its cause.
 */
export function sqliteErrorOf(error: unknown): unknown {
  return isStorageUnavailable(error) && error.cause !== undefined ? error.cause : error;
}

/** Free bytes below which a write error in a folder is taken for a full disk. */
const NEARLY_FULL_BYTES = 1 << 20;

/**
 * What a full disk makes of opening `what` (in `dir`), or null for another error: no question of
 * permissions. SQLite reports some writes a full disk refused as I/O errors: those count when the
 * disk has next to no room left.
 */
function diskFull(what: string, dir: string, error: unknown): DatabaseOpenError | null {
  const sqliteError = sqliteErrorOf(error) as { code?: string; message?: string };
  const code = sqliteError.code ?? '';
  const full = code === 'ENOSPC' || code.startsWith('SQLITE_FULL') || (code.startsWith('SQLITE_IOERR') && freeBytes(dir) < NEARLY_FULL_BYTES);
  if (!full) return null;
  return new DatabaseOpenError(`cannot use ${what}: the disk is full (${sqliteError.message ?? code}); free some space on it, or choose another data directory with --data-dir or LMSP_DATA_DIR`,
    EXIT_DATABASE_UNAVAILABLE, { cause: error });
}

function freeBytes(dir: string): number {
  try {
    const stats = statfsSync(dir);
    return stats.bavail * stats.bsize;
  } catch {
    return Infinity;
  }
}

/**
 * LMSP 4: the data directory holds the operator token, the pairing key and the database. One
 * that another user owns, or that other users may write, could hold links or files planted there
 * to make this process write through them (over any file it may write) or trust what it reads
 * (a token file, a service address), so it is refused, never used. A directory that does not
 * exist yet is made with mode 0700.
 */
export function assertPrivateDataDir(dataDir: string): void {
  const uid = process.getuid?.();
  if (uid === undefined) return; // no owners to compare (Windows)
  let stats;
  try {
    stats = statSync(dataDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw unusableDataDir(dataDir, error);
  }
  if (!stats.isDirectory()) {
    throw new DatabaseOpenError(`cannot use the data directory ${dataDir}: it is not a folder; choose another with --data-dir or LMSP_DATA_DIR`, EXIT_DATABASE_UNAVAILABLE);
  }
  if (stats.uid !== uid) {
    throw new DatabaseOpenError(`cannot use the data directory ${dataDir}: it belongs to another user (uid ${stats.uid}), who could have `
      + 'planted files in it; use a folder of this user\'s own (--data-dir or LMSP_DATA_DIR)', EXIT_DATABASE_UNAVAILABLE);
  }
  // Group-writable is as bad unless the group is this user's own primary one (a private group,
  // as systems with a 002 umask make for each user).
  const writableByOthers = (stats.mode & 0o002) !== 0 || ((stats.mode & 0o020) !== 0 && stats.gid !== process.getgid?.());
  if (writableByOthers) {
    throw new DatabaseOpenError(`cannot use the data directory ${dataDir}: other users can write in it (mode ${(stats.mode & 0o7777).toString(8)}); `
      + `check that it holds nothing of theirs and make it private (chmod 700 ${dataDir}), or use another (--data-dir or LMSP_DATA_DIR)`, EXIT_DATABASE_UNAVAILABLE);
  }
}

const STORAGE_ERROR_PREFIXES = ['SQLITE_FULL', 'SQLITE_READONLY', 'SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_IOERR',
  'SQLITE_CANTOPEN', 'SQLITE_CORRUPT', 'SQLITE_NOTADB', 'SQLITE_PROTOCOL', 'SQLITE_NOMEM', 'SQLITE_PERM'];

/** Whether an error means the database cannot be written right now (LMSP section 9: 503). */
export function isStorageError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && STORAGE_ERROR_PREFIXES.some((prefix) => code.startsWith(prefix));
}

export function toStorageUnavailable(error: unknown): ServiceError {
  const code = (error as { code?: string }).code ?? 'unknown';
  return new ServiceError('storage_unavailable', undefined, { cause: error, headers: { 'x-storage-error': code } });
}

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export function loadMigrations(): Migration[] {
  const folder = packagePath('src', 'store', 'migrations');
  return readdirSync(folder)
    .filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file))
    .sort()
    .map((file) => ({ version: Number(file.slice(0, 4)), name: file.replace(/\.sql$/, ''), sql: readFileSync(join(folder, file), 'utf8') }));
}

/** Something to run after the transaction that scheduled it has committed (notifications). */
export type AfterCommit = () => void;

export interface WriteContext {
  afterCommit(hook: AfterCommit): void;
}

interface PendingWrite {
  work: (context: WriteContext) => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

export interface OpenOptions {
  /** Create the file (and the folder) when missing; the CLI's read-only commands pass false. */
  create?: boolean;
  /** Run `PRAGMA quick_check` before use; on by default. */
  check?: boolean;
}

function assertIsSqliteFile(path: string): void {
  const header = Buffer.alloc(16);
  let size: number;
  try {
    const stat = statSync(path);
    if (!stat.isFile()) {
      throw new DatabaseOpenError(
        `${path} is not a file. lmsp will not touch it: move it away or point --data-dir elsewhere.`, EXIT_DATABASE_NOT_USABLE);
    }
    size = stat.size;
    if (size === 0) return; // an empty file is a new database to SQLite
    const fd = openSync(path, 'r');
    try {
      readSync(fd, header, 0, 16, 0);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    if (error instanceof DatabaseOpenError) throw error;
    const why = (error as NodeJS.ErrnoException).code === 'EACCES' ? refusedBecause(path, 'read') : (error as Error).message;
    throw new DatabaseOpenError(`cannot read ${path}: ${why}`, EXIT_DATABASE_UNAVAILABLE, { cause: error });
  }
  if (size < 100 || header.toString('latin1') !== SQLITE_HEADER) {
    throw new DatabaseOpenError(
      `${path} is not an SQLite database (its header is wrong). lmsp will not touch it: move it away or point --data-dir elsewhere.`,
      EXIT_DATABASE_NOT_USABLE,
    );
  }
}

/** Why this user may not read or write `file`, and what makes it usable. */
function refusedBecause(file: string, verb: 'read' | 'write'): string {
  const stats = statSync(file);
  const mode = (stats.mode & 0o777).toString(8);
  const uid = process.getuid?.();
  if (uid !== undefined && stats.uid !== uid) {
    return `it belongs to another user (uid ${stats.uid}, mode ${mode}); give it to this one (chown ${uid} ${file}) or run lmsp as its owner`;
  }
  return `this user may not ${verb} it (mode ${mode}); make it ${verb === 'read' ? 'readable and writable' : 'writable'}: chmod 600 ${file}`;
}

/**
 * The database and its log files must be writable by this user. SQLite opens a file it may not
 * write read-only without a word (the service then failed at its first write, with an API error
 * where a start needs a reason), and makes the log files it creates, when it first reads a WAL
 * database, with the database's mode: they then refused every later start even once the
 * database was writable again. Checked before SQLite opens anything, so nothing is created.
 */
function assertWritable(path: string): void {
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      accessSync(file, fsConstants.W_OK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') continue;
      const why = code === 'EROFS' ? 'it is on a read-only file system' : code === 'EACCES' ? refusedBecause(file, 'write') : (error as Error).message;
      throw new DatabaseOpenError(`cannot write ${file}: ${why}`, EXIT_DATABASE_UNAVAILABLE, { cause: error });
    }
  }
}

function hasMigrationsTable(sqlite: Sqlite): boolean {
  return sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get() !== undefined;
}

function schemaVersionOf(sqlite: Sqlite): number {
  return (sqlite.prepare('SELECT max(version) AS version FROM schema_migrations').get() as { version: number | null }).version ?? 0;
}

/**
 * Refuses, by reading only, a database that is not lmsp's (tables but no migrations table) or
 * that a newer lmsp wrote; an empty one is a new database.
 */
function assertLmspSchema(sqlite: Sqlite, path: string, latest: number): void {
  if (!hasMigrationsTable(sqlite)) {
    const tables = sqlite.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number };
    if (tables.n > 0) {
      throw new DatabaseOpenError(`${path} is an SQLite database but not one of lmsp's; lmsp will not modify it.`, EXIT_DATABASE_NOT_USABLE);
    }
    return;
  }
  const current = schemaVersionOf(sqlite);
  if (current > latest) {
    throw new DatabaseOpenError(
      `${path} has schema version ${current}, written by a newer lmsp (this one knows up to ${latest}). Upgrade lmsp; the database was not changed.`,
      EXIT_DATABASE_TOO_NEW,
    );
  }
}

/**
 * What became of the file opened as `identity`, as its path names it now: `deleted`, `replaced`
 * by another file, or null while it is the same (or when the file system cannot tell).
 */
function fileChange(path: string, identity: { dev: number; ino: number }): 'deleted' | 'replaced' | null {
  let now: { dev: number; ino: number };
  try {
    now = statSync(path);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'deleted' : null;
  }
  return now.dev === identity.dev && now.ino === identity.ino ? null : 'replaced';
}

export class Database {
  readonly sqlite: Sqlite;
  readonly path: string;
  /** The schema this database had when it was opened, where opening it migrated it to a later one (null otherwise, and for a new database). */
  upgradedFrom: number | null = null;
  private queue: PendingWrite[] = [];
  private flushScheduled = false;
  private readonly runBatch: BetterSqlite3.Transaction<(jobs: PendingWrite[], outcomes: Array<{ ok: boolean; value: unknown }>, hooks: AfterCommit[]) => void>;
  private closed = false;
  private totalChangesStatement: BetterSqlite3.Statement | null = null;
  /** Told how long each committed transaction took, BEGIN to COMMIT (LMSP 15: metrics). */
  onCommit: ((seconds: number) => void) | null = null;

  /** The file opened, as the file system names it: a file at `path` that is not this one is not the database. */
  private readonly identity: { dev: number; ino: number };

  private constructor(sqlite: Sqlite, path: string) {
    this.sqlite = sqlite;
    this.path = path;
    const { dev, ino } = statSync(path);
    this.identity = { dev, ino };
    const runOne = sqlite.transaction((job: PendingWrite, hooks: AfterCommit[]) => job.work({ afterCommit: (hook) => hooks.push(hook) }));
    this.runBatch = sqlite.transaction((jobs: PendingWrite[], outcomes: Array<{ ok: boolean; value: unknown }>, hooks: AfterCommit[]) => {
      for (const job of jobs) {
        // SQLITE_FULL, IOERR and BUSY may roll the whole transaction back by themselves; from then
        // on statements would autocommit one by one, so stop and fail the batch instead.
        if (!sqlite.inTransaction) throw Object.assign(new Error('transaction rolled back by SQLite'), { code: 'SQLITE_ABORT_ROLLBACK' });
        const jobHooks: AfterCommit[] = [];
        try {
          outcomes.push({ ok: true, value: runOne(job, jobHooks) });
          hooks.push(...jobHooks);
        } catch (error) {
          if (isStorageError(error) || !sqlite.inTransaction) throw error;
          outcomes.push({ ok: false, value: error });
        }
      }
    });
  }

  /**
   * Gives up to `maxPages` free pages (what deleted rows left) back to the file system, in one
   * short write transaction; the file shrinks at the next checkpoint. Returns how many it gave
   * back: 0 when none are free, or for a database made before lmsp kept `auto_vacuum`
   * incremental (`lmsp gc --vacuum` converts one).
   */
  releaseFreePages(maxPages: number): number {
    if (this.sqlite.pragma('auto_vacuum', { simple: true }) !== AUTO_VACUUM_INCREMENTAL) return 0;
    const before = this.sqlite.pragma('freelist_count', { simple: true }) as number;
    if (before === 0) return 0;
    this.sqlite.pragma(`incremental_vacuum(${Math.max(1, Math.floor(maxPages))})`);
    return before - (this.sqlite.pragma('freelist_count', { simple: true }) as number);
  }

  /**
   * Why the open database is no longer the file at its path (deleted, or replaced by another
   * file), or null while it is: SQLite goes on writing to the open file, so every commit from then
   * on would be lost at the next start.
   */
  fileLost(): string | null {
    const change = fileChange(this.path, this.identity);
    return change && `the database ${this.path} was ${change === 'replaced' ? 'replaced by another file' : 'deleted'} while the service ran`;
  }

  /** The write-ahead log this connection uses, once seen: SQLite keeps it while any connection is open. */
  private logIdentity: { dev: number; ino: number } | null = null;

  /**
   * Why the open database's write-ahead log is no longer the file at its path (deleted), or null
   * while it is: SQLite goes on writing to the open log, and what it holds is lost if the process
   * then dies before a checkpoint; a clean close still writes it into the database.
   */
  logLost(): string | null {
    const log = `${this.path}-wal`;
    if (this.logIdentity === null) {
      const seen = statSync(log, { throwIfNoEntry: false });
      if (seen) this.logIdentity = { dev: seen.dev, ino: seen.ino };
      return null;
    }
    const change = fileChange(log, this.logIdentity);
    return change && `the database's write-ahead log ${log} was ${change} while the service ran`;
  }

  /** A consistent copy of the open database, its log included, made at `target` (SQLite's VACUUM INTO). */
  copyTo(target: string): void {
    this.sqlite.prepare('VACUUM INTO ?').run(target);
  }

  /** Rewrites the whole database with incremental `auto_vacuum` (no other connection may be open). */
  vacuum(): void {
    this.sqlite.pragma('auto_vacuum = INCREMENTAL');
    this.sqlite.exec('VACUUM');
  }

  static open(dataDir: string, options: OpenOptions = {}): Database {
    const { create = true, check = true } = options;
    assertPrivateDataDir(dataDir);
    const path = join(dataDir, DATABASE_FILE);
    const created = !existsSync(path);
    if (created) {
      // Its log without it: the database was deleted or moved, and what it held is not in the log
      // alone. Starting a new one beside that log would lose it all without a word.
      if (statSync(`${path}-wal`, { throwIfNoEntry: false })?.size) {
        throw new DatabaseOpenError(`no database at ${path}, but its write-ahead log ${DATABASE_FILE}-wal is there: the database was deleted or moved. `
          + `lmsp will not start another beside that log: put the database back, or delete ${DATABASE_FILE}-wal and ${DATABASE_FILE}-shm to start empty.`,
        EXIT_DATABASE_NOT_USABLE);
      }
      if (!create) throw new DatabaseOpenError(`no database at ${path}: start the service once with this data directory`, EXIT_DATABASE_UNAVAILABLE);
      try {
        mkdirSync(dataDir, { recursive: true, mode: 0o700 });
        closeSync(openSync(path, 'a', 0o600));
      } catch (error) {
        throw unusableDataDir(dataDir, error);
      }
    } else {
      assertIsSqliteFile(path);
      assertWritable(path);
    }
    let sqlite: Sqlite;
    try {
      sqlite = new BetterSqlite3(path, { fileMustExist: true, timeout: BUSY_TIMEOUT_MS });
    } catch (error) {
      throw new DatabaseOpenError(`cannot open ${path}: ${(error as Error).message}`, EXIT_DATABASE_UNAVAILABLE, { cause: error });
    }
    try {
      // Read before anything is written (the journal mode and the file mode included): a file
      // that is corrupt, another program's database or a newer lmsp's stays exactly as it was.
      sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      if (check) {
        const result = sqlite.pragma('quick_check', { simple: true });
        if (result !== 'ok') throw Object.assign(new Error(`quick_check: ${String(result)}`), { code: 'SQLITE_CORRUPT' });
      }
      const migrations = loadMigrations();
      assertLmspSchema(sqlite, path, migrations.at(-1)?.version ?? 0);
      try {
        chmodSync(path, 0o600);
      } catch {
        // not our file to change; writing to it will tell whether we can use it
      }
      // A new database gives the pages that retention frees back to the file system
      // (releaseFreePages); this can only be set while it has no tables.
      if (created) sqlite.pragma('auto_vacuum = INCREMENTAL');
      sqlite.pragma('journal_mode = WAL');
      // better-sqlite3 leaves WAL at NORMAL, which can lose the last commits on power loss.
      sqlite.pragma('synchronous = FULL');
      sqlite.pragma('foreign_keys = OFF');
      sqlite.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
      // Migration 0009 re-encodes the token ids of existing delta events.
      sqlite.function('lmsp_tokens_from_fixed_width', { deterministic: true },
        (blob: unknown) => (blob instanceof Uint8Array ? packedFromFixedWidth(blob) : null));
      const database = new Database(sqlite, path);
      database.migrate(migrations);
      return database;
    } catch (error) {
      sqlite.close();
      if (error instanceof DatabaseOpenError) throw error;
      const code = (error as { code?: string }).code ?? '';
      if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') {
        throw new DatabaseOpenError(
          `${path} is corrupt (${(error as Error).message}). lmsp will not modify it: restore a backup, or move it away to start empty.`,
          EXIT_DATABASE_NOT_USABLE, { cause: error });
      }
      // What SQLite said, rather than the words a request would get for it.
      throw diskFull(path, dataDir, error)
        ?? new DatabaseOpenError(`cannot use ${path}: ${(sqliteErrorOf(error) as Error).message}`, EXIT_DATABASE_UNAVAILABLE, { cause: error });
    }
  }

  /** Applies the migrations this database lacks, each recorded in the same transaction. */
  private migrate(migrations: readonly Migration[]): void {
    if (!hasMigrationsTable(this.sqlite)) {
      this.sqlite.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    }
    const current = schemaVersionOf(this.sqlite);
    const record = this.sqlite.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    const missing = migrations.filter((m) => m.version > current);
    for (const migration of missing) {
      this.transaction(() => {
        this.sqlite.exec(migration.sql);
        record.run(migration.version, migration.name, Math.floor(Date.now() / 1000));
      });
    }
    if (current > 0 && missing.length > 0) this.upgradedFrom = current;
  }

  get schemaVersion(): number {
    return (this.sqlite.prepare('SELECT max(version) AS version FROM schema_migrations').get() as { version: number }).version;
  }

  /** Runs `work` in one BEGIN IMMEDIATE transaction now; storage failures become 503s. */
  transaction<T>(work: (context: WriteContext) => T): T {
    const hooks: AfterCommit[] = [];
    let result: T;
    const started = performance.now();
    try {
      result = this.sqlite.transaction(() => work({ afterCommit: (hook) => hooks.push(hook) })).immediate();
    } catch (error) {
      throw isStorageError(error) ? toStorageUnavailable(error) : error;
    }
    this.onCommit?.((performance.now() - started) / 1000);
    for (const hook of hooks) hook();
    return result;
  }

  /** Queues `work` for the next group commit; resolves after its transaction has committed. */
  write<T>(work: (context: WriteContext) => T): Promise<T> {
    if (this.closed) return Promise.reject(new ServiceError('storage_unavailable', 'The service is shutting down.'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const jobs = this.queue;
    this.queue = [];
    if (jobs.length === 0) return;
    const outcomes: Array<{ ok: boolean; value: unknown }> = [];
    const hooks: AfterCommit[] = [];
    const started = performance.now();
    try {
      this.runBatch.immediate(jobs, outcomes, hooks);
      this.onCommit?.((performance.now() - started) / 1000);
    } catch (error) {
      const failure = isStorageError(error) || (error as { code?: string }).code === 'SQLITE_ABORT_ROLLBACK'
        ? toStorageUnavailable(error)
        : error;
      for (const job of jobs) job.reject(failure);
      return;
    }
    jobs.forEach((job, index) => {
      const outcome = outcomes[index]!;
      if (outcome.ok) job.resolve(outcome.value);
      else job.reject(outcome.value);
    });
    for (const hook of hooks) {
      try {
        hook();
      } catch {
        // a notification must never undo or hide a commit
      }
    }
  }

  /** Rows this connection has inserted, updated or deleted since it opened (SQLite `total_changes()`). */
  totalChanges(): number {
    this.totalChangesStatement ??= this.sqlite.prepare('SELECT total_changes() AS changes').pluck();
    return this.totalChangesStatement.get() as number;
  }

  /** Waits for queued writes, then closes the connection. */
  async close(): Promise<void> {
    while (this.queue.length > 0 || this.flushScheduled) await new Promise((resolve) => setImmediate(resolve));
    this.closed = true;
    if (this.sqlite.open) this.sqlite.close();
  }
}
