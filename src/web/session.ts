/**
 * The signed-in session and every request the page makes. The token lives in this tab's
 * sessionStorage only (LMSP 15): never localStorage, never a cookie, so closing the tab or signing
 * out forgets it, and no other tab or site can send it. Requests go to the page's own origin by
 * relative URLs, so the page works wherever the service is reached.
 */
import type { Client, PairedClient } from './wire.js';

const SESSION_KEY = 'lmsp.session';

export interface Session {
  token: string;
  client: Client;
}

export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string | null, message: string, readonly param: string | null = null) {
    super(message);
  }
}

export function loadSession(): Session | null {
  try {
    const text = sessionStorage.getItem(SESSION_KEY);
    const session = text ? (JSON.parse(text) as Session) : null;
    return session && typeof session.token === 'string' && session.client ? session : null;
  } catch {
    return null;
  }
}

export function saveSession(session: Session): void {
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
}

export function forgetSession(): void {
  sessionStorage.removeItem(SESSION_KEY);
}

export function hasScope(session: Session | null, scope: string): boolean {
  return !!session && (session.client.scopes.includes('admin') || session.client.scopes.includes(scope));
}

/** Told when the service no longer accepts the token (revoked, or the data directory changed). */
let onTokenRejected: (message: string) => void = () => {};

export function whenTokenRejected(handler: (message: string) => void): void {
  onTokenRejected = handler;
}

async function errorOf(response: globalThis.Response): Promise<ApiError> {
  let body: { error?: { code?: string; message?: string; param?: string | null } } = {};
  try {
    body = (await response.json()) as typeof body;
  } catch {
    // not JSON: the status says enough
  }
  const error = body.error ?? {};
  return new ApiError(response.status, error.code ?? null, error.message ?? `The service answered ${response.status}.`, error.param ?? null);
}

export function authorization(session: Session): Record<string, string> {
  return { authorization: `Bearer ${session.token}` };
}

/** Checks an answer: a rejected token ends the session, other errors are thrown. */
export async function checked(session: Session | null, response: globalThis.Response): Promise<globalThis.Response> {
  if (response.ok) return response;
  const error = await errorOf(response);
  if (session && error.status === 401 && error.code === 'invalid_token') {
    onTokenRejected('The service no longer accepts this session (the client was revoked, or the token is no longer valid). Sign in again with a new pairing code.');
  }
  throw error;
}

/** What a request that reached no service fails with (status 0): said in words, not as the browser's "Failed to fetch". */
export function unreachable(): ApiError {
  return new ApiError(0, 'connection_lost', 'The service cannot be reached (stopped, or restarting). This page asks again by itself.');
}

/** A fetch of the service's: a network failure (a TypeError) is `unreachable()`. */
export async function fetchService(path: string, init: RequestInit): Promise<globalThis.Response> {
  try {
    return await fetch(path, init);
  } catch (failure) {
    if (failure instanceof TypeError && !init.signal?.aborted) throw unreachable();
    throw failure;
  }
}

export async function request<T>(session: Session | null, method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = session ? authorization(session) : {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetchService(path, {
    method,
    headers,
    body: body === undefined ? null : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit',
  });
  await checked(session, response);
  return (await response.json()) as T;
}

/**
 * Revokes the session's own token (`DELETE /v1/clients/me`), so that signing out ends it at the
 * service too; `refused` for a token that may not revoke itself (a `metrics` token serves
 * GET /metrics only). Its answer never counts as a rejected token: the session is over either way.
 */
export async function revokeSession(session: Session): Promise<'revoked' | 'unreachable' | 'refused'> {
  try {
    const response = await fetch('v1/clients/me', { method: 'DELETE', headers: authorization(session), credentials: 'omit' });
    if (response.ok || response.status === 401) return 'revoked';
    return response.status === 403 ? 'refused' : 'unreachable';
  } catch {
    return 'unreachable';
  }
}

/** LMSP 4: exchanges a pairing code for a token (the code is single use). */
export async function pair(code: string, clientName: string): Promise<Session> {
  const paired = await request<PairedClient>(null, 'POST', 'v1/pair', { code: code.trim(), client_name: clientName });
  const { token, ...client } = paired;
  return { token, client };
}
