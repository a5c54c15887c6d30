/**
 * LMSP section 2, hostile pages: a Host that is not this service's is refused before anything
 * else (DNS rebinding), and so is an Origin that is not its own or an allowed one (CSRF), before
 * the pairing limiter or a token is looked at; CORS headers go to allowed origins only.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { api, withService } from '../helpers/service.js';
import { rawGet, rawRequest } from '../helpers/raw-http.js';

function hostOf(url: string): string {
  return new URL(url).host;
}

describe('Host and Origin checks (LMSP section 2)', () => {
  test('a Host that is not loopback, the listen address or allowed gets 421 misdirected_request, token or not', () =>
    withService({}, async (service) => {
      const { port } = new URL(service.url);
      for (const path of ['/v1/service', '/healthz', '/v1/clients/me']) {
        const answer = await rawGet(service.url, path, { Host: `evil.example:${port}`, Authorization: `Bearer ${service.token}` });
        assert.equal(answer.status, 421, `${path} with a rebound name`);
        const body = JSON.parse(answer.body) as { error: { code: string; type: string; param: unknown } };
        assert.equal(body.error.code, 'misdirected_request');
        assert.ok('param' in body.error);
      }
      for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, 'localhost', `[::1]:${port}`]) {
        const answer = await rawGet(service.url, '/v1/clients/me', { Host: host, Authorization: `Bearer ${service.token}` });
        assert.equal(answer.status, 200, `Host ${host} is this service`);
      }
      for (const host of ['localhost:99999', '127.0.0.1:65536', '127.0.0.1:0000065536', '127.0.0.1:abc']) {
        const answer = await rawGet(service.url, '/v1/clients/me', { Host: host, Authorization: `Bearer ${service.token}` });
        assert.equal(answer.status, 421, `Host ${host} names no port a service can listen on`);
      }
      // RFC 3986: a port is any number of digits, leading zeros or none.
      for (const host of [`localhost:000${port}`, 'localhost:']) {
        const answer = await rawGet(service.url, '/v1/clients/me', { Host: host, Authorization: `Bearer ${service.token}` });
        assert.equal(answer.status, 200, `Host ${host}`);
      }
      const missing = await rawRequest(service.url, 'GET /v1/service HTTP/1.0\r\n\r\n');
      assert.equal(missing.status, 421, 'a request without Host is not known to be for us');
      // HTTP/1.1 requires a Host; one without it is still answered as LMSP answers a foreign Host.
      const missing11 = await rawRequest(service.url, 'GET /v1/service HTTP/1.1\r\nConnection: close\r\n\r\n');
      assert.equal(missing11.status, 421, 'an HTTP/1.1 request without Host');
      assert.equal((JSON.parse(missing11.body) as { error: { code: string } }).error.code, 'misdirected_request');
    }));

  test('two Host headers are 400; an absolute-form target is checked by its own authority, as RFC 9112 has servers read it', () =>
    withService({}, async (service) => {
      const { port } = new URL(service.url);
      for (const hosts of [['127.0.0.1', 'evil.example'], ['evil.example', '127.0.0.1']]) {
        const answer = await rawRequest(service.url, `GET /v1/service HTTP/1.1\r\n${hosts.map((host) => `Host: ${host}\r\n`).join('')}Connection: close\r\n\r\n`);
        assert.equal(answer.status, 400, `Host ${hosts.join(', ')}`);
        const { error } = JSON.parse(answer.body) as { error: { code: string; param: string } };
        assert.deepEqual([error.code, error.param], ['invalid_request', 'Host']);
      }
      const foreign = await rawRequest(service.url, `GET http://evil.example:${port}/v1/service HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
      assert.equal(foreign.status, 421, 'the target names another host');
      const own = await rawRequest(service.url, `GET http://localhost:${port}/v1/service HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
      assert.equal(own.status, 200, 'the target names this service, whatever Host says');
    }));

  test('--allowed-hosts adds names', () => withService({ args: ['--allowed-hosts', 'lmsp.lan,box.local'] }, async (service) => {
    const { port } = new URL(service.url);
    assert.equal((await rawGet(service.url, '/v1/service', { Host: `lmsp.lan:${port}` })).status, 200);
    assert.equal((await rawGet(service.url, '/v1/service', { Host: 'BOX.local' })).status, 200);
    assert.equal((await rawGet(service.url, '/v1/service', { Host: `other.lan:${port}` })).status, 421);
  }));

  test('a foreign Origin gets 403 origin_not_allowed before the pairing limiter counts anything', () => withService({}, async (service) => {
    const body = '{"code":"AAAA-AAAA","client_name":"web"}';
    const pair = (origin: string | null) => rawRequest(service.url, [
      'POST /v1/pair HTTP/1.1', `Host: ${hostOf(service.url)}`, 'Content-Type: application/json',
      ...(origin ? [`Origin: ${origin}`] : []), `Content-Length: ${body.length}`, 'Connection: close', '', body,
    ].join('\r\n'));
    for (let i = 0; i < 10; i++) {
      const answer = await pair('http://evil.example');
      assert.equal(answer.status, 403);
      assert.equal((JSON.parse(answer.body) as { error: { code: string } }).error.code, 'origin_not_allowed');
      assert.equal(answer.headers['access-control-allow-origin'], undefined, 'no CORS header for a foreign origin');
      assert.equal(answer.headers.vary, 'Origin', 'an answer that depends on Origin says so');
    }
    // The page burned nothing: a real code still pairs.
    const code = await service.client.createPairingCode({ name: 'after' });
    const paired = await fetch(`${service.url}/v1/pair`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: code.code, client_name: 'after' }),
    });
    assert.equal(paired.status, 201);
    // The service's own origin is allowed, without CORS headers (it is not cross-origin).
    const own = await rawGet(service.url, '/v1/service', { Host: hostOf(service.url), Origin: `http://${hostOf(service.url)}` });
    assert.equal(own.status, 200);
    assert.equal(own.headers['access-control-allow-origin'], undefined);
    const none = await rawGet(service.url, '/v1/service', { Host: hostOf(service.url) });
    assert.equal(none.headers.vary, 'Origin', 'without Origin too: the same URL answers another page otherwise');
    const otherPort = await rawGet(service.url, '/v1/service', { Host: hostOf(service.url), Origin: 'http://127.0.0.1:1' });
    assert.equal(otherPort.status, 403, 'another port is another origin');
  }));

  test('--allowed-origins get CORS headers and their preflights answered', () => withService({ args: ['--allowed-origins', 'http://app.example:3000'] }, async (service) => {
    const host = hostOf(service.url);
    const preflightOf = (origin: string, asks: string) => rawRequest(service.url, [
      'OPTIONS /v1/responses HTTP/1.1', `Host: ${host}`, `Origin: ${origin}`, 'Access-Control-Request-Method: POST', asks, 'Connection: close', '', '',
    ].join('\r\n'));
    const preflight = await preflightOf('http://app.example:3000', 'Access-Control-Request-Headers: authorization, content-type, idempotency-key');
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers['access-control-allow-origin'], 'http://app.example:3000');
    assert.match(preflight.headers['access-control-allow-headers'] ?? '', /idempotency-key/);
    assert.match(preflight.headers['access-control-allow-methods'] ?? '', /POST/);
    assert.equal(preflight.headers['access-control-allow-private-network'], undefined, 'said only when asked');
    // Private Network Access: Chrome asks before a public page reaches a loopback service.
    const privateNetwork = await preflightOf('http://app.example:3000', 'Access-Control-Request-Private-Network: true');
    assert.equal(privateNetwork.status, 204);
    assert.equal(privateNetwork.headers['access-control-allow-private-network'], 'true');
    const refused = await preflightOf('http://evil.example', 'Access-Control-Request-Private-Network: true');
    assert.equal(refused.status, 403);
    assert.equal(refused.headers['access-control-allow-private-network'], undefined);
    const get = await rawGet(service.url, '/v1/clients/me', { Host: host, Origin: 'http://app.example:3000', Authorization: `Bearer ${service.token}` });
    assert.equal(get.status, 200);
    assert.equal(get.headers['access-control-allow-origin'], 'http://app.example:3000');
    assert.match(get.headers['access-control-expose-headers'] ?? '', /location/);
    const denied = await rawGet(service.url, '/v1/service', { Host: host, Origin: 'http://app.example:3001' });
    assert.equal(denied.status, 403);
  }));

  test('event streams to an allowed origin carry the CORS headers, so its page can read them', () =>
    withService({ args: ['--allowed-origins', 'http://app.example:3000'] }, async (service) => {
      const origin = 'http://app.example:3000';
      const post = (path: string, json: unknown) => api(service, path, { method: 'POST', json, headers: { origin } });
      const response = await post('/v1/responses', { model: 'lmsp-tiny', input: 'x', max_output_tokens: 2, stream: true });
      const chat = await post('/v1/chat/completions', { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2, stream: true });
      const created = (await (await post('/v1/responses', { model: 'lmsp-tiny', input: 'x', max_output_tokens: 2, background: true })).json()) as {
        id: string; task: { id: string };
      };
      const events = await api(service, `/v1/tasks/${created.task.id}/events?stream=true`, { headers: { origin } });
      const replay = await api(service, `/v1/responses/${created.id}?stream=true`, { headers: { origin } });
      for (const [what, answer] of Object.entries({ response, chat, events, replay })) {
        assert.equal(answer.status, 200, what);
        assert.match(answer.headers.get('content-type') ?? '', /^text\/event-stream/, what);
        assert.equal(answer.headers.get('access-control-allow-origin'), origin, `${what} stream`);
        assert.match(answer.headers.get('access-control-expose-headers') ?? '', /location/, what);
        await answer.text();
      }
      assert.match(response.headers.get('location') ?? '', /^\/v1\/responses\/resp_/, 'the stream keeps its own headers');
      assert.match(chat.headers.get('lmsp-task-id') ?? '', /^task_/);
    }));
});
