/** The `service_config` table: the service's identity and the settings an operator stored. */
import BetterSqlite3 from 'better-sqlite3';
import { join } from 'node:path';
import { newId } from '../ids.js';
import { DATABASE_FILE, type Sqlite } from './db.js';

const SERVICE_ID_KEY = 'service.id';

export class ServiceConfigTable {
  private readonly getStatement;
  private readonly setStatement;
  private readonly insertIfMissingStatement;
  private readonly deleteStatement;
  private readonly prefixStatement;

  constructor(db: Sqlite) {
    this.getStatement = db.prepare<[string], { value: string }>('SELECT value FROM service_config WHERE key = ?');
    this.setStatement = db.prepare('INSERT INTO service_config (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value');
    this.insertIfMissingStatement = db.prepare('INSERT INTO service_config (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING');
    this.deleteStatement = db.prepare('DELETE FROM service_config WHERE key = ?');
    this.prefixStatement = db.prepare<{ prefix: string }, { key: string; value: string }>(
      'SELECT key, value FROM service_config WHERE substr(key, 1, length(@prefix)) = @prefix ORDER BY key');
  }

  get(key: string): string | null {
    return this.getStatement.get(key)?.value ?? null;
  }

  set(key: string, value: string): void {
    this.setStatement.run(key, value);
  }

  delete(key: string): boolean {
    return this.deleteStatement.run(key).changes > 0;
  }

  /** Every key starting with `prefix`, without the prefix. */
  withPrefix(prefix: string): Record<string, string> {
    const entries = this.prefixStatement.all({ prefix }).map((row) => [row.key.slice(prefix.length), row.value] as const);
    return Object.fromEntries(entries);
  }

  /** The `svc_` id: generated on first start, then never changed (LMSP section 3). */
  ensureServiceId(): string {
    this.insertIfMissingStatement.run(SERVICE_ID_KEY, newId('svc'));
    return this.get(SERVICE_ID_KEY)!;
  }
}

/**
 * The service id of a data directory's database, read without writing anything (the CLI uses it
 * to check that what listens at a recorded address is this data directory's service); null when
 * there is no database or no id yet.
 */
export function readServiceId(dataDir: string): string | null {
  let db: Sqlite | null = null;
  try {
    db = new BetterSqlite3(join(dataDir, DATABASE_FILE), { readonly: true, fileMustExist: true, timeout: 2000 });
    const row = db.prepare<[string], { value: string }>('SELECT value FROM service_config WHERE key = ?').get(SERVICE_ID_KEY);
    return row?.value ?? null;
  } catch {
    return null;
  } finally {
    db?.close();
  }
}
