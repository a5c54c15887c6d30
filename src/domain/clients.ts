/** Clients, scopes and who may see what (LMSP section 4). */

// LMSP 4: `metrics` allows GET /metrics only, so a scraper's token can do nothing else.
export const SCOPES = ['responses', 'models:read', 'models:write', 'admin', 'metrics'] as const;
export type Scope = (typeof SCOPES)[number];

/** What a new pairing grants when the operator names no scopes. */
export const DEFAULT_SCOPES: readonly Scope[] = ['responses', 'models:read'];

/** The longest name a client may have (and so a pairing code, whose name is meant as the client's). */
export const MAX_CLIENT_NAME_LENGTH = 200;

/**
 * A client's name (and a code's) holds no control characters (U+0000-U+001F, U+007F-U+009F):
 * `lmsp clients ls` prints names to the operator's terminal, where they would be escape sequences.
 */
export const CLIENT_NAME_PATTERN = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';

/** The longest a pairing code may stay valid, however it is made (API, CLI, dashboard): a week. */
export const MAX_PAIRING_TTL_SECONDS = 7 * 24 * 3600;

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

/**
 * LMSP section 4, isolation: without `admin`, a client sees only its own records; another
 * client's look exactly like ids that do not exist.
 */
export function canSee(client: Pick<Client, 'id' | 'scopes'>, ownerId: string): boolean {
  return client.id === ownerId || hasScope(client, 'admin');
}
