/**
 * LMSP section 4, pairing under attack: the limiter holds under concurrency, a pairing answer
 * (which holds a token) can be replayed only until its code's own expiry, and codes are stored
 * keyed so the database alone cannot be searched for a live one.
 */
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { normalizePairingCode } from '../../src/auth/secrets.js';
import { withService, type TestService } from '../helpers/service.js';

function readRows<T>(service: TestService, sql: string): T[] {
  const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'), { readonly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

function pair(service: TestService, code: string, key?: string, name = 'x'): Promise<Response> {
  return fetch(`${service.url}/v1/pair`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
    body: JSON.stringify({ code, client_name: name }),
  });
}

describe('pairing under attack (LMSP section 4)', () => {
  test('300 parallel wrong codes get at most 5 answers other than 429', () => withService({}, async (service) => {
    const answers = await Promise.all(Array.from({ length: 300 }, () => pair(service, 'AAAA-AAAA').then((response) => response.status)));
    const other = answers.filter((status) => status !== 429);
    assert.ok(other.length <= 5, `answers other than 429: ${other.length}`);
    assert.ok(other.every((status) => status === 401));
  }));

  test('attempts spread over loopback source addresses (127.0.0.2, 127.0.0.3, ...) share one count', () => withService({}, async (service) => {
    const { port } = new URL(service.url);
    const fromAddress = (localAddress: string) => new Promise<number>((resolve, reject) => {
      const body = JSON.stringify({ code: 'AAAA-AAAA', client_name: 'x' });
      const request = httpRequest({ host: '127.0.0.1', port, path: '/v1/pair', method: 'POST', localAddress,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (response) => {
        response.resume();
        resolve(response.statusCode!);
      });
      request.on('error', reject);
      request.end(body);
    });
    const statuses: number[] = [];
    for (let i = 2; i <= 12; i++) statuses.push(await fromAddress(`127.0.0.${i}`));
    assert.deepEqual(statuses.slice(0, 5), [401, 401, 401, 401, 401]);
    assert.deepEqual(statuses.slice(5), Array(6).fill(429), 'the sixth address of this machine waits as the first would');
  }));

  test('malformed codes count as failed attempts, and are refused with 429 once the address is limited', () => withService({}, async (service) => {
    // Codes the body schema refuses (empty, over 64 characters) are attempts like any other.
    const malformed = await Promise.all(Array.from({ length: 300 }, (_, i) => pair(service, i % 2 === 0 ? '' : 'Z'.repeat(65)).then((response) => response.status)));
    const other = malformed.filter((status) => status !== 429);
    assert.ok(other.length <= 5, `answers other than 429: ${other.length}`);
    assert.ok(other.every((status) => status === 400));
    assert.equal((await pair(service, 'AAAA-AAAA')).status, 429, 'a well-formed code waits out the limit too');
  }));

  test('a reused Idempotency-Key counts as a failed attempt', () => withService({}, async (service) => {
    const code = await service.client.createPairingCode();
    assert.equal((await pair(service, code.code, 'k1', 'first')).status, 201);
    for (let i = 0; i < 5; i++) assert.equal((await pair(service, code.code, 'k1', `other${i}`)).status, 422, 'same key, another body');
    assert.equal((await pair(service, 'BBBB-BBBB')).status, 429, 'the reused keys were counted');
  }));

  test('a successful pair can be replayed through its key only until the code\'s own expiry', () => withService({}, async (service) => {
    const code = await service.client.createPairingCode({ ttl_seconds: 120 });
    const first = await pair(service, code.code, 'replay-me');
    assert.equal(first.status, 201);
    const token = ((await first.json()) as { token: string }).token;
    const again = await pair(service, code.code, 'replay-me');
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(((await again.json()) as { token: string }).token, token);
    const rows = readRows<{ scope: string; expires_at: number }>(service, "SELECT scope, expires_at FROM idempotency_keys WHERE scope LIKE 'pair:%'");
    assert.equal(rows.length, 1);
    assert.ok(rows[0]!.expires_at <= code.expires_at, `the replay expires with the code (${rows[0]!.expires_at} <= ${code.expires_at}), not after the 24 h idempotency period`);
  }));

  test('pairing codes are stored as an HMAC with the data directory\'s key, kept outside the database, owner-only', () => withService({}, async (service) => {
    const code = await service.client.createPairingCode({ name: 'keyed' });
    const normalized = normalizePairingCode(code.code)!;
    const keyPath = join(service.dataDir, 'pairing.key');
    assert.equal(statSync(keyPath).mode & 0o777, 0o600);
    const key = readFileSync(keyPath);
    assert.equal(key.length, 32);
    const stored = readRows<{ code_hash: Buffer }>(service, "SELECT code_hash FROM pairing_codes WHERE name = 'keyed'")[0]!.code_hash;
    const bare = createHash('sha256').update(`pairing-code:${normalized}`).digest();
    assert.notDeepEqual(stored, bare, 'not a bare hash that an offline search of 2^40 codes could find');
    assert.deepEqual(stored, createHmac('sha256', key).update(`pairing-code:${normalized}`).digest());
    assert.equal((await pair(service, code.code)).status, 201, 'and the code works');
  }));
});
