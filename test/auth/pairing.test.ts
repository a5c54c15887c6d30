import assert from 'node:assert/strict';
import BetterSqlite3 from 'better-sqlite3';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { LmspClient } from '../../src/api/client.js';
import type { ClientObject, ResponseObject } from '../../src/api/types.js';
import { runCli } from '../helpers/cli.js';
import { exchange, openSocket } from '../helpers/raw-http.js';
import { withDataDir } from '../helpers/data-dir.js';
import { api, errorOf, pairClient, waitFor, withService, type TestService } from '../helpers/service.js';

function as(service: TestService, token: string) {
  return (path: string, init: RequestInit & { json?: unknown } = {}) => api({ url: service.url, token }, path, init);
}

function filesUnder(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

describe('pairing, scoped tokens and isolation (LMSP section 4)', () => {
  test('pair: a code is exchanged once for a token; wrong, used and expired codes look the same', { timeout: 60_000 }, () => withService({}, async (service) => {
    const code = await service.client.createPairingCode({ name: 'phone', scopes: ['responses'] });
    assert.match(code.code, /^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$/);
    assert.deepEqual(code.scopes, ['responses']);
    const pair = (body: object) => fetch(`${service.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const paired = await pair({ code: code.code.toLowerCase(), client_name: 'phone' });
    assert.equal(paired.status, 201);
    const client = (await paired.json()) as ClientObject & { token: string };
    assert.match(client.token, /^lmsp_[A-Za-z0-9_-]{43}$/);
    assert.match(client.id, /^cli_/);
    assert.deepEqual(client.scopes, ['responses']);
    assert.equal(client.name, 'phone');
    const me = await as(service, client.token)('/v1/clients/me');
    assert.equal(me.status, 200);
    assert.equal(((await me.json()) as ClientObject).id, client.id);
    assert.equal('token' in ((await (await as(service, client.token)('/v1/clients/me')).json()) as object), false, 'the token is shown once');

    const used = await pair({ code: code.code, client_name: 'again' });
    const wrong = await pair({ code: 'ZZZZ-ZZZZ', client_name: 'x' });
    const expiring = await service.client.createPairingCode({ ttl_seconds: 1 });
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const expired = await pair({ code: expiring.code, client_name: 'late' });
    const bodies = [];
    for (const response of [used, wrong, expired]) {
      assert.equal(response.status, 401);
      bodies.push(await errorOf(response));
    }
    assert.ok(bodies.every((body) => body.code === 'invalid_pairing_code'));
    assert.equal(new Set(bodies.map((body) => body.message)).size, 1, 'the three failures are indistinguishable');

    // null is absent, as for the optional fields of every other body: the defaults.
    const nulls = await api(service, '/v1/pairing-codes', { method: 'POST', json: { name: null, scopes: null, ttl_seconds: null } });
    assert.equal(nulls.status, 201, await nulls.clone().text());
    const defaults = (await nulls.json()) as { scopes: string[]; expires_at: number; name: string | null };
    assert.deepEqual([defaults.scopes, defaults.name], [['responses', 'models:read'], null]);
    assert.ok(Math.abs(defaults.expires_at - (Date.now() / 1000 + 600)) < 30, `expires in 10 minutes: ${defaults.expires_at}`);
  }));

  test('a client name with control characters is refused, before the code is used: it would reach the operator\'s terminal as escape sequences', { timeout: 60_000 }, () => withService({}, async (service) => {
    const code = await service.client.createPairingCode({});
    const pair = (body: object) => fetch(`${service.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    for (const name of ['\u001b[31mred', 'nul\u0000', 'csi\u009b2J', 'del\u007f']) {
      const refused = await pair({ code: code.code, client_name: name });
      assert.equal(refused.status, 400, JSON.stringify(name));
      const error = await errorOf(refused);
      assert.deepEqual([error.code, error.param], ['invalid_request', 'client_name']);
    }
    const named = await pair({ code: code.code, client_name: 'Ümit\'s phone 📱' });
    assert.equal(named.status, 201, 'the code is still good, and names may hold any other character');
    const label = await api(service, '/v1/pairing-codes', { method: 'POST', json: { name: '\u001b]0;title\u0007' } });
    assert.equal(label.status, 400);
    assert.equal((await errorOf(label)).param, 'name');
  }));

  test('failed pairing attempts are limited to 5 a minute per address, then 429 with Retry-After', { timeout: 60_000 }, () => withService({}, async (service) => {
    const attempt = () => fetch(`${service.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: 'AAAA-AAAA', client_name: 'x' }) });
    for (let i = 0; i < 5; i++) assert.equal((await attempt()).status, 401);
    const limited = await attempt();
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
    assert.equal((await errorOf(limited)).code, 'rate_limited');
    // Even a right code waits out the limit.
    const code = await service.client.createPairingCode();
    const right = await fetch(`${service.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: code.code, client_name: 'x' }) });
    assert.equal(right.status, 429);
    // Whatever it sends: a body that is not JSON, or not sent as JSON, is not read at all.
    for (const [type, body] of [['application/json', '{"code": '], ['text/plain', 'AAAA-AAAA']]) {
      const other = await fetch(`${service.url}/v1/pair`, { method: 'POST', headers: { 'content-type': type! }, body });
      assert.equal(other.status, 429, type);
      assert.equal((await errorOf(other)).code, 'rate_limited');
    }
  }));

  test('bodies that are not JSON are failed attempts too', { timeout: 60_000 }, () => withService({}, async (service) => {
    for (let i = 0; i < 5; i++) {
      const broken = await fetch(`${service.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
      assert.equal(broken.status, 400);
      assert.equal((await errorOf(broken)).code, 'invalid_json');
    }
    const attempt = await fetch(`${service.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: 'AAAA-AAAA', client_name: 'x' }) });
    assert.equal(attempt.status, 429);
  }));

  test('scopes: each route refuses a token without its scope with 403 insufficient_scope naming it', { timeout: 60_000 }, () => withService({}, async (service) => {
    const reader = await pairClient(service, ['models:read']);
    const responder = await pairClient(service, ['responses']);
    const writer = await pairClient(service, ['models:write']);
    const checks: Array<[string, string, string, string, object?]> = [
      [reader.token, 'POST', '/v1/responses', 'responses', { model: 'lmsp-tiny', input: 'x' }],
      [reader.token, 'GET', '/v1/tasks', 'responses'],
      [reader.token, 'GET', '/v1/responses/resp_x', 'responses'],
      [reader.token, 'POST', '/v1/models', 'models:write', { path: 'x.gguf' }],
      [reader.token, 'DELETE', '/v1/models/lmsp-tiny', 'models:write'],
      [reader.token, 'POST', '/v1/models/lmsp-tiny/verify', 'models:write'],
      [responder.token, 'GET', '/v1/models', 'models:read'],
      [responder.token, 'GET', '/v1/models/lmsp-tiny', 'models:read'],
      [responder.token, 'GET', '/v1/clients', 'admin'],
      [responder.token, 'DELETE', `/v1/clients/${reader.id}`, 'admin'],
      [responder.token, 'POST', '/v1/pairing-codes', 'admin', {}],
      // models:write alone reads its own model pulls only (LMSP 5.1): a reader of models, none.
      [reader.token, 'GET', '/v1/tasks/task_x', 'responses'],
    ];
    for (const [token, method, path, scope, body] of checks) {
      const response = await as(service, token)(path, { method, ...(body ? { json: body } : {}) });
      assert.equal(response.status, 403, `${method} ${path}`);
      const error = await errorOf(response);
      assert.equal(error.code, 'insufficient_scope');
      assert.match(error.message, new RegExp(scope));
    }
    // And what a scope allows works.
    assert.equal((await as(service, reader.token)('/v1/models')).status, 200);
    assert.equal((await as(service, responder.token)('/v1/tasks')).status, 200);
    assert.equal((await as(service, responder.token)('/v1/clients/me')).status, 200);
    assert.equal((await as(service, writer.token)('/v1/models/lmsp-tiny/verify', { method: 'POST' })).status, 200);
    assert.equal((await as(service, writer.token)('/v1/tasks')).status, 200, 'models:write lists its own model pulls');
  }));

  test('isolation: another client\'s responses and tasks are 404 on every path; lists show only one\'s own; admin sees all', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' } }, async (service) => {
      const alice = await pairClient(service, ['responses'], 'alice');
      const bob = await pairClient(service, ['responses'], 'bob');
      const finished = await alice.client.createResponse({ model: 'lmsp-tiny', input: 'secret', max_output_tokens: 3 });
      const running = await alice.client.createResponse({ model: 'lmsp-tiny', input: 'long', background: true, max_output_tokens: 3000 });
      for (const [method, path] of [
        ['GET', `/v1/responses/${finished.body.id}`],
        ['GET', `/v1/responses/${finished.body.id}?stream=true`],
        ['GET', `/v1/responses/${finished.body.id}/input_items`],
        ['DELETE', `/v1/responses/${finished.body.id}`],
        ['POST', `/v1/responses/${running.body.id}/cancel`],
        ['GET', `/v1/tasks/${finished.body.task.id}`],
        ['GET', `/v1/tasks/${finished.body.task.id}/events`],
        ['GET', `/v1/tasks/${finished.body.task.id}/events?stream=true`],
        ['POST', `/v1/tasks/${running.body.task.id}/cancel`],
      ] as const) {
        const response = await as(service, bob.token)(path, { method });
        assert.equal(response.status, 404, `${method} ${path}`);
        assert.equal((await errorOf(response)).code, 'not_found');
      }
      const continued = await as(service, bob.token)('/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', previous_response_id: finished.body.id } });
      assert.equal(continued.status, 404);
      assert.equal((await bob.client.listTasks()).data.length, 0);
      assert.equal((await as(service, bob.token)(`/v1/tasks?after=${finished.body.task.id}`)).status, 400);
      assert.equal((await alice.client.listTasks()).data.length, 2);
      assert.notEqual((await alice.client.getTask(running.body.task.id)).status, 'cancelled', "bob's cancel did nothing");
      // The operator (admin) sees and controls everyone's.
      assert.equal((await service.client.listTasks()).data.length, 2);
      assert.equal((await service.client.getResponse(finished.body.id)).id, finished.body.id);
      assert.equal((await service.client.cancelResponse(running.body.id)).status, 202);
    }));

  test('revoking a client stops its token on the next request; its records stay', { timeout: 60_000 }, () => withService({}, async (service) => {
    const client = await pairClient(service, ['responses']);
    const created = await client.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
    const revoke = await api(service, `/v1/clients/${client.id}`, { method: 'DELETE' });
    assert.equal(revoke.status, 200);
    assert.ok(((await revoke.json()) as ClientObject).revoked_at);
    const after = await as(service, client.token)('/v1/tasks');
    assert.equal(after.status, 401);
    assert.equal((await errorOf(after)).code, 'invalid_token');
    assert.equal((await service.client.getResponse(created.body.id)).id, created.body.id, 'records stay');
    const listed = await service.client.listClients();
    assert.ok(listed.find((c) => c.id === client.id)?.revoked_at);
  }));

  test('GET /v1/clients is paged as tasks are: limit, after, order, has_more, first_id and last_id', { timeout: 60_000 }, () => withService({}, async (service) => {
    const paired = [];
    for (let i = 0; i < 5; i += 1) paired.push(await pairClient(service, ['responses'], `c${i}`));
    const all = await service.client.listClients();
    assert.ok(all.length >= 6, 'the operator and five paired clients');
    for (const client of paired) assert.ok(all.some((c) => c.id === client.id));
    const key = (c: ClientObject) => [c.created_at, c.id] as const;
    const sorted = [...all].sort((a, b) => (key(a)[0] - key(b)[0]) || (key(a)[1] < key(b)[1] ? -1 : key(a)[1] > key(b)[1] ? 1 : 0));
    assert.deepEqual(all.map((c) => c.id), sorted.map((c) => c.id), 'listClients: oldest first');

    type Page = { object: string; data: ClientObject[]; has_more: boolean; first_id: string | null; last_id: string | null };
    const walk = async (order: 'asc' | 'desc') => {
      const seen: string[] = [];
      let after: string | null = null;
      for (let pages = 0; ; pages += 1) {
        assert.ok(pages < all.length, 'the pages end');
        const response = await api(service, `/v1/clients?limit=2&order=${order}${after ? `&after=${after}` : ''}`);
        assert.equal(response.status, 200);
        const page = (await response.json()) as Page;
        assert.equal(page.object, 'list');
        assert.ok(page.data.length <= 2);
        assert.equal(page.first_id, page.data[0]?.id ?? null);
        assert.equal(page.last_id, page.data.at(-1)?.id ?? null);
        seen.push(...page.data.map((c) => c.id));
        if (!page.has_more) return seen;
        after = page.last_id;
      }
    };
    assert.deepEqual(await walk('asc'), sorted.map((c) => c.id));
    assert.deepEqual(await walk('desc'), sorted.map((c) => c.id).reverse());
    const newest = (await (await api(service, '/v1/clients?limit=1')).json()) as Page;
    assert.deepEqual(newest.data.map((c) => c.id), [sorted.at(-1)!.id], 'newest first by default');
    assert.equal(newest.has_more, true);

    for (const [query, param] of [['limit=0', 'limit'], ['limit=1001', 'limit'], ['order=up', 'order'], ['after=cli_nobody', 'after']] as const) {
      const bad = await api(service, `/v1/clients?${query}`);
      assert.equal(bad.status, 400, query);
      const error = await errorOf(bad);
      assert.equal(error.code, 'invalid_request', query);
      assert.equal(error.param, param, query);
    }
    const notAdmin = await as(service, paired[0]!.token)('/v1/clients');
    assert.equal(notAdmin.status, 403);
    assert.equal((await errorOf(notAdmin)).code, 'insufficient_scope');
  }));

  test('a request whose body is still arriving when its client is revoked does nothing: no pairing code, no task', { timeout: 60_000 }, () => withService({}, async (service) => {
    // The token was good when the headers arrived; the revoke lands before the body is complete.
    const admin = await pairClient(service, ['admin', 'responses'], 'slow');
    const host = new URL(service.url).host;
    const started = async (path: string, body: string) => {
      const socket = await openSocket(service.url);
      socket.write(`POST ${path} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${admin.token}\r\n`
        + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`);
      return { socket, rest: body.slice(5) };
    };
    const codeRequest = await started('/v1/pairing-codes', JSON.stringify({ scopes: ['admin'], name: 'escalated' }));
    const taskRequest = await started('/v1/responses', JSON.stringify({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2, background: true }));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const pairingCodes = () => {
      const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'), { readonly: true });
      try {
        return (db.prepare('SELECT count(*) AS n FROM pairing_codes').get() as { n: number }).n;
      } finally {
        db.close();
      }
    };
    const codesBefore = pairingCodes();
    const tasksBefore = (await service.client.listTasks({ limit: 100 })).data.length;
    assert.equal((await api(service, `/v1/clients/${admin.id}`, { method: 'DELETE' })).status, 200);
    for (const { socket, rest } of [codeRequest, taskRequest]) {
      const answer = await exchange(socket, rest);
      socket.destroy();
      assert.equal(answer.status, 401, answer.body);
      assert.equal((JSON.parse(answer.body) as { error: { code: string } }).error.code, 'invalid_token');
      assert.equal(answer.headers['www-authenticate'], 'Bearer');
    }
    assert.equal((await service.client.listTasks({ limit: 100 })).data.length, tasksBefore, 'no task was created');
    assert.equal(pairingCodes(), codesBefore, 'no pairing code was made');
  }));

  test('DELETE /v1/clients/me: any client ends its own token, no admin needed; other clients go on', { timeout: 60_000 }, () => withService({}, async (service) => {
    const leaving = await pairClient(service, ['models:read']);
    const staying = await pairClient(service, ['models:read']);
    const revoked = await as(service, leaving.token)('/v1/clients/me', { method: 'DELETE' });
    assert.equal(revoked.status, 200);
    const body = (await revoked.json()) as ClientObject;
    assert.equal(body.id, leaving.id);
    assert.ok(body.revoked_at);
    assert.equal((await errorOf(await as(service, leaving.token)('/v1/models'))).code, 'invalid_token');
    assert.equal((await as(service, leaving.token)('/v1/clients/me', { method: 'DELETE' })).status, 401, 'once only');
    assert.equal((await as(service, staying.token)('/v1/models')).status, 200);
    assert.ok((await service.client.listClients()).find((c) => c.id === leaving.id)?.revoked_at, 'the record stays');
  }));

  test("revoking the operator's client kills its token and gives the CLI a new one at once", { timeout: 60_000 }, () => withService({}, async (service) => {
    const admin = await pairClient(service, ['admin'], 'console');
    const operator = (await service.client.listClients()).find((c) => c.name === 'operator' && c.revoked_at === null)!;
    const revoke = await as(service, admin.token)(`/v1/clients/${operator.id}`, { method: 'DELETE' });
    assert.equal(revoke.status, 200);
    assert.equal(((await revoke.json()) as ClientObject).id, operator.id);
    const old = await as(service, service.token)('/v1/clients/me');
    assert.equal(old.status, 401, 'the old operator token is dead');
    const fresh = readFileSync(join(service.dataDir, 'operator.token'), 'utf8').trim();
    assert.notEqual(fresh, service.token);
    assert.equal(statSync(join(service.dataDir, 'operator.token')).mode & 0o777, 0o600);
    const me = (await (await as(service, fresh)('/v1/clients/me')).json()) as ClientObject;
    assert.deepEqual([me.name, me.scopes, me.revoked_at], ['operator', ['admin'], null]);
    assert.notEqual(me.id, operator.id, 'a new operator client, the revoked one stays revoked');
    // The CLI reads the new token: no restart, no copying.
    const listed = await runCli(['clients', 'ls', '--json', '--data-dir', service.dataDir]);
    assert.equal(listed.code, 0, listed.stderr);
    const clients = (JSON.parse(listed.stdout) as { data: ClientObject[] }).data;
    assert.ok(clients.find((c) => c.id === operator.id)?.revoked_at);
  }));

  test('no token, token body or pairing code is stored anywhere in the data directory or logged', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_LOG_LEVEL: 'debug' } }, async (service) => {
      const secrets: string[] = [];
      for (let i = 0; i < 3; i++) {
        const code = await service.client.createPairingCode({ name: `c${i}` }, );
        secrets.push(code.code, code.code.replace('-', ''));
        const paired = await new LmspClient({ baseUrl: service.url }).pair(code.code, `c${i}`, { idempotencyKey: `pair-${i}` });
        secrets.push(paired.token, paired.token.slice('lmsp_'.length));
        // Replays of secret-bearing answers are stored too: sealed.
        const again = await new LmspClient({ baseUrl: service.url }).pair(code.code, `c${i}`, { idempotencyKey: `pair-${i}` });
        assert.equal(again.token, paired.token, 'a replayed pairing returns the same token');
        const client = new LmspClient({ baseUrl: service.url, token: paired.token });
        await client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
      }
      const unused = await service.client.request<{ code: string }>('POST', '/v1/pairing-codes', {}, { idempotencyKey: 'code-key' });
      secrets.push(unused.body.code, unused.body.code.replace('-', ''));
      await service.stop();
      for (const file of filesUnder(service.dataDir).filter((path) => !path.endsWith('operator.token'))) {
        const bytes = readFileSync(file);
        for (const secret of secrets) assert.equal(bytes.includes(Buffer.from(secret)), false, `${file} holds a secret`);
      }
      for (const secret of secrets) assert.equal(service.output().includes(secret), false, 'no secret in the logs');
      assert.equal(statSync(join(service.dataDir, 'operator.token')).mode & 0o777, 0o600);
      assert.equal(statSync(join(service.dataDir, 'lmsp.db')).mode & 0o777, 0o600);
    }));

  test('lmsp pair works with the service stopped, and its code pairs once it runs; lmsp clients ls|revoke', { timeout: 60_000 }, () => withDataDir(async (dataDir) => {
    await withService({ dataDir }, async (service) => {
      await service.stop();
      const made = await runCli(['pair', '--name', 'offline', '--scopes', 'responses,models:read', '--ttl', '5m', '--json', '--data-dir', dataDir]);
      assert.equal(made.code, 0, made.stderr);
      const code = JSON.parse(made.stdout) as { code: string; expires_at: number; scopes: string[] };
      assert.deepEqual(Object.keys(code), ['object', 'code', 'name', 'scopes', 'expires_at'], 'the pairing code as POST /v1/pairing-codes answers it');
      assert.deepEqual(code.scopes, ['responses', 'models:read']);
      const bad = await runCli(['pair', '--scopes', 'everything', '--data-dir', dataDir]);
      assert.equal(bad.code, 2);
      const running = await service.restart();
      const paired = await new LmspClient({ baseUrl: running.url }).pair(code.code, 'offline');
      const listed = await runCli(['clients', 'ls', '--json', '--data-dir', dataDir]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.equal((JSON.parse(listed.stdout) as { data: ClientObject[] }).data[0]!.id, paired.id, 'newest first, as GET /v1/clients lists them');
      const text = await runCli(['clients', 'ls', '--data-dir', dataDir]);
      assert.match(text.stdout, /offline/);
      const revoked = await runCli(['clients', 'revoke', paired.id, '--data-dir', dataDir]);
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.equal((await api({ url: running.url, token: paired.token }, '/v1/clients/me')).status, 401);
      const response = await waitFor(async () => (await running.client.listClients()).find((client) => client.id === paired.id)?.revoked_at);
      assert.ok(response);
    });
  }));

  test('binding beyond loopback is logged as a warning', { timeout: 30_000 }, () => withService({ args: ['--host', '0.0.0.0'] }, async (service) => {
    assert.match(service.output(), /listening beyond loopback/);
    const answer = (await (await fetch(`${service.url.replace('0.0.0.0', '127.0.0.1')}/v1/service`)).json()) as ResponseObject;
    assert.equal(answer.object as string, 'service');
  }));
});

describe('pairing before the first start', () => {
  test('lmsp pair on a data directory the service never used; the code works once it starts', { timeout: 60_000 }, () => withDataDir(async (dataDir) => {
    const made = await runCli(['pair', '--json', '--data-dir', dataDir]);
    assert.equal(made.code, 0, made.stderr);
    const { code } = JSON.parse(made.stdout) as { code: string };
    await withService({ dataDir }, async (service) => {
      const paired = await new LmspClient({ baseUrl: service.url }).pair(code, 'early-bird');
      assert.match(paired.token, /^lmsp_/);
    });
  }));
});
