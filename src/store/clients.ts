/** The `clients` table: paired clients, known by the SHA-256 of their token (LMSP section 4). */
import type { Client, Scope } from '../domain/clients.js';
import type { Sqlite } from './db.js';
import { ReadCache } from './read-cache.js';

export interface DbClient {
  id: string;
  name: string;
  scopes: string;
  token_hash: Buffer;
  kind: 'paired' | 'operator';
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

export function toClient(row: DbClient): Client {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes.split(' ').filter(Boolean) as Scope[],
    kind: row.kind,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

export class ClientTable {
  private readonly insertStatement;
  private readonly byTokenStatement;
  private readonly getStatement;
  private readonly listStatement;
  private readonly pageAscStatement;
  private readonly pageDescStatement;
  private readonly revokeStatement;
  private readonly touchStatement;
  private readonly operatorStatement;
  private readonly replaceTokenStatement;
  private readonly liveStatement;
  /** Every request looks its token up: cached, dropped on any change (read-cache.ts). */
  private readonly byToken: ReadCache<string, Client>;

  constructor(db: Sqlite) {
    this.byToken = new ReadCache(db);
    this.insertStatement = db.prepare(`
      INSERT INTO clients (id, name, scopes, token_hash, kind, created_at) VALUES (?, ?, ?, ?, ?, ?)`);
    this.byTokenStatement = db.prepare<[Buffer], DbClient>('SELECT * FROM clients WHERE token_hash = ?');
    this.getStatement = db.prepare<[string], DbClient>('SELECT * FROM clients WHERE id = ?');
    this.listStatement = db.prepare<[], DbClient>('SELECT * FROM clients ORDER BY created_at, id');
    // Pages in (created_at, id) order from a cursor client's position; the cursor's own row is
    // left out, and a cursor that is not there (null, null) starts at either end.
    this.pageAscStatement = db.prepare<[number | null, number | null, string | null, number], DbClient>(`
      SELECT * FROM clients WHERE ? IS NULL OR (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?`);
    this.pageDescStatement = db.prepare<[number | null, number | null, string | null, number], DbClient>(`
      SELECT * FROM clients WHERE ? IS NULL OR (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?`);
    this.revokeStatement = db.prepare('UPDATE clients SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
    this.touchStatement = db.prepare('UPDATE clients SET last_used_at = ? WHERE id = ?');
    this.liveStatement = db.prepare<[string], { live: number }>('SELECT revoked_at IS NULL AS live FROM clients WHERE id = ?');
    this.operatorStatement = db.prepare<[], DbClient>(
      "SELECT * FROM clients WHERE kind = 'operator' AND revoked_at IS NULL ORDER BY created_at DESC LIMIT 1");
    this.replaceTokenStatement = db.prepare('UPDATE clients SET token_hash = ? WHERE id = ?');
  }

  insert(client: Client, tokenHash: Buffer): void {
    this.byToken.clear();
    this.insertStatement.run(client.id, client.name, client.scopes.join(' '), tokenHash, client.kind, client.createdAt);
  }

  /** The client holding this token hash, revoked or not; the caller decides. */
  findByTokenHash(tokenHash: Buffer): Client | null {
    return this.byToken.get(tokenHash.toString('hex'), () => {
      const row = this.byTokenStatement.get(tokenHash);
      return row ? toClient(row) : null;
    });
  }

  get(id: string): Client | null {
    const row = this.getStatement.get(id);
    return row ? toClient(row) : null;
  }

  list(): Client[] {
    return this.listStatement.all().map(toClient);
  }

  /** One page of clients after `after` (null: from the start) in creation order or its reverse. */
  page(query: { after: Client | null; limit: number; order: 'asc' | 'desc' }): { clients: Client[]; hasMore: boolean } {
    const statement = query.order === 'asc' ? this.pageAscStatement : this.pageDescStatement;
    const at = query.after?.createdAt ?? null;
    const rows = statement.all(at, at, query.after?.id ?? null, query.limit + 1);
    return { clients: rows.slice(0, query.limit).map(toClient), hasMore: rows.length > query.limit };
  }

  /**
   * Whether the client exists and is not revoked, read from the table itself (not the token
   * cache): inside a transaction, the answer holds until its commit.
   */
  isLive(id: string): boolean {
    return this.liveStatement.get(id)?.live === 1;
  }

  revoke(id: string, at: number): boolean {
    this.byToken.clear();
    return this.revokeStatement.run(at, id).changes > 0;
  }

  touch(id: string, at: number): void {
    this.byToken.clear();
    this.touchStatement.run(at, id);
  }

  operator(): Client | null {
    const row = this.operatorStatement.get();
    return row ? toClient(row) : null;
  }

  replaceToken(id: string, tokenHash: Buffer): void {
    this.byToken.clear();
    this.replaceTokenStatement.run(tokenHash, id);
  }
}
