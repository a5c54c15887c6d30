/** Clients and scopes (LMSP section 4). */

// LMSP 4: `metrics` allows GET /metrics only, so a scraper's token can do nothing else.
export const SCOPES = ['responses', 'models:read', 'models:write', 'admin', 'metrics'] as const;
export type Scope = (typeof SCOPES)[number];

/** What a new pairing grants when the operator names no scopes. */
export const DEFAULT_SCOPES: readonly Scope[] = ['responses', 'models:read'];

export interface Client {
  id: string;
  name: string;
  scopes: Scope[];
  kind: 'paired' | 'operator';
  createdAt: number;
  lastUsedAt: number | null;
  revokedAt: number | null;
}

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** `admin` grants everything (LMSP section 4). */
export function hasScope(client: Pick<Client, 'scopes'>, scope: Scope): boolean {
  return client.scopes.includes('admin') || client.scopes.includes(scope);
}
