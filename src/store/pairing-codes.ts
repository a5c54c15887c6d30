/** The `pairing_codes` table: single-use, expiring codes, stored only as hashes (LMSP section 4). */
import type { Scope } from '../domain/clients.js';
import type { Sqlite } from './db.js';

export interface PairingCode {
  name: string | null;
  scopes: Scope[];
  createdAt: number;
  expiresAt: number;
}

interface DbPairingCode {
  code_hash: Buffer;
  name: string | null;
  scopes: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
  client_id: string | null;
}

export class PairingCodeTable {
  private readonly insertStatement;
  private readonly claimStatement;
  private readonly sweepStatement;
  private readonly countExpiredStatement;

  constructor(db: Sqlite) {
    this.insertStatement = db.prepare(
      'INSERT INTO pairing_codes (code_hash, name, scopes, created_at, expires_at) VALUES (?, ?, ?, ?, ?)');
    // Claiming is one conditional update, so two requests with the same code cannot both win.
    this.claimStatement = db.prepare<{ client_id: string; now: number; code_hash: Buffer }, DbPairingCode>(`
      UPDATE pairing_codes SET used_at = @now, client_id = @client_id
      WHERE code_hash = @code_hash AND used_at IS NULL AND expires_at > @now
      RETURNING *`);
    this.sweepStatement = db.prepare('DELETE FROM pairing_codes WHERE expires_at < ?');
    this.countExpiredStatement = db.prepare<[number], { n: number }>('SELECT count(*) AS n FROM pairing_codes WHERE expires_at < ?');
  }

  insert(codeHash: Buffer, code: PairingCode): void {
    this.insertStatement.run(codeHash, code.name, code.scopes.join(' '), code.createdAt, code.expiresAt);
  }

  /** Marks the code used by `clientId`; null when it is unknown, used or expired. */
  claim(codeHash: Buffer, clientId: string, now: number): PairingCode | null {
    const row = this.claimStatement.get({ client_id: clientId, now, code_hash: codeHash });
    if (!row) return null;
    return { name: row.name, scopes: row.scopes.split(' ').filter(Boolean) as Scope[], createdAt: row.created_at, expiresAt: row.expires_at };
  }

  /** Forgets codes that expired before `before`. */
  deleteExpired(before: number): number {
    return this.sweepStatement.run(before).changes;
  }

  /** How many codes `deleteExpired(before)` would forget (`lmsp gc --dry-run`). */
  countExpired(before: number): number {
    return this.countExpiredStatement.get(before)!.n;
  }
}
