/**
 * The edge of the HTTP server (LMSP sections 2 and 9): every refusal, even one given before the
 * body was read or by the HTTP parser itself, reaches the client in the LMSP error shape; slow
 * and idle connections are bounded on purpose. With fetch (undici, as the SDKs use it) and with
 * raw sockets, 20 tries where a race is involved.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { connectionCap, openFileLimit, RESERVED_FILES } from '../../src/http/edge.js';
import { api, waitFor, withService } from '../helpers/service.js';
import { exchange, openSocket, rawRequest } from '../helpers/raw-http.js';

const TRIES = 20;
const MIB = 1024 * 1024;

function bigJson(bytes: number): string {
  return JSON.stringify({ model: 'lmsp-tiny', input: 'x'.repeat(bytes) });
}

function errorCode(body: string): string {
  const parsed = JSON.parse(body) as { error: { code: string; type: string; message: string; param: unknown } };
  assert.equal(typeof parsed.error.type, 'string');
  assert.equal(typeof parsed.error.message, 'string');
  assert.ok('param' in parsed.error);
  return parsed.error.code;
}

describe('refusals the client can read (LMSP 2, 9)', () => {
  test(`a 2 MiB body gets 413 request_too_large, never a broken pipe (fetch, ${TRIES} tries)`, () => withService({}, async (service) => {
    const body = bigJson(2 * MIB);
    for (let i = 0; i < TRIES; i++) {
      const response = await api(service, '/v1/responses', { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      assert.equal(response.status, 413, `try ${i}`);
      assert.equal(errorCode(await response.text()), 'request_too_large');
    }
  }));

  test(`415 and 401 answered before the body are readable too (fetch, ${TRIES} tries each)`, () => withService({}, async (service) => {
    const body = bigJson(MIB - 4096);
    for (let i = 0; i < TRIES; i++) {
      const plain = await api(service, '/v1/responses', { method: 'POST', body, headers: { 'content-type': 'text/plain' } });
      assert.equal(plain.status, 415, `try ${i}`);
      assert.equal(errorCode(await plain.text()), 'unsupported_media_type');
      const anonymous = await fetch(`${service.url}/v1/responses`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      assert.equal(anonymous.status, 401, `try ${i}`);
      assert.equal(errorCode(await anonymous.text()), 'invalid_token');
    }
  }));

  test(`the same over a raw socket (${TRIES} tries)`, () => withService({}, async (service) => {
    const host = new URL(service.url).host;
    const body = bigJson(2 * MIB);
    for (let i = 0; i < TRIES; i++) {
      const socket = await openSocket(service.url);
      try {
        const head = `POST /v1/responses HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${service.token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
        const answer = await exchange(socket, Buffer.concat([Buffer.from(head), Buffer.from(body)]));
        assert.equal(answer.status, 413, `try ${i}`);
        assert.equal(errorCode(answer.body), 'request_too_large');
      } finally {
        socket.destroy();
      }
    }
  }));

  test('past 4x the limit the answer comes and the connection closes', () => withService({}, async (service) => {
    const host = new URL(service.url).host;
    const answer = await rawRequest(service.url,
      `POST /v1/responses HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${service.token}\r\nContent-Type: application/json\r\nContent-Length: ${5 * MIB}\r\n\r\n{"model":`);
    assert.equal(answer.status, 413);
    assert.equal(errorCode(answer.body), 'request_too_large');
    assert.equal(answer.headers.connection, 'close');
  }));

  test('Expect: 100-continue: a body the headers already refuse is never asked for (413, 401, 415, 404 at once, the connection closed); one they allow is', () =>
    withService({}, async (service) => {
      const host = new URL(service.url).host;
      const head = (length: number, token: string | null) => `POST /v1/responses HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n`
        + `${token ? `Authorization: Bearer ${token}\r\n` : ''}Content-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;
      // Headers only: the body is never sent, so a final answer can only come without it.
      const refusedSocket = await openSocket(service.url);
      try {
        const closed = new Promise<void>((resolve) => refusedSocket.once('close', () => resolve()));
        const tooLarge = await exchange(refusedSocket, head(2 * MIB, service.token), 5_000);
        assert.equal(tooLarge.status, 413);
        assert.equal(errorCode(tooLarge.body), 'request_too_large');
        assert.equal(tooLarge.headers.connection, 'close', 'closed: the body it declared may still come');
        await Promise.race([closed, new Promise((_, reject) => setTimeout(() => reject(new Error('the connection stayed open')), 5_000))]);
      } finally {
        refusedSocket.destroy();
      }
      const noToken = await rawRequest(service.url, head(20, null), 5_000);
      assert.equal(noToken.status, 401);
      assert.equal(errorCode(noToken.body), 'invalid_token');
      const notJson = await rawRequest(service.url, head(20, service.token).replace('application/json', 'text/plain'), 5_000);
      assert.equal(notJson.status, 415);
      assert.equal(errorCode(notJson.body), 'unsupported_media_type');
      const noRoute = await rawRequest(service.url, head(20, service.token).replace('/v1/responses', '/v1/nothing'), 5_000);
      assert.equal(noRoute.status, 404);
      assert.equal(errorCode(noRoute.body), 'not_found');
      const body = JSON.stringify({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
      const socket = await openSocket(service.url);
      try {
        const interim = await new Promise<string>((resolve, reject) => {
          let text = '';
          const timer = setTimeout(() => reject(new Error(`no 100 Continue; got ${text}`)), 5_000);
          socket.on('data', function onData(chunk: Buffer) {
            text += chunk.toString();
            if (!text.includes('\r\n\r\n')) return;
            clearTimeout(timer);
            socket.off('data', onData);
            resolve(text);
          });
          socket.write(head(Buffer.byteLength(body), service.token));
        });
        assert.match(interim, /^HTTP\/1\.1 100 Continue\r\n/);
        const answer = await exchange(socket, body);
        assert.equal(answer.status, 200, answer.body);
      } finally {
        socket.destroy();
      }
    }));
});

describe('errors of the HTTP parser, in the LMSP shape (LMSP 9)', () => {
  test('a 20 KB header gets 431 request_header_too_large', () => withService({}, async (service) => {
    const host = new URL(service.url).host;
    const answer = await rawRequest(service.url, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    assert.equal(answer.status, 431);
    assert.equal(errorCode(answer.body), 'request_header_too_large');
    assert.match(answer.headers['content-type'] ?? '', /application\/json/);
  }));

  test('a malformed Content-Length or request line gets 400 invalid_request', () => withService({}, async (service) => {
    const host = new URL(service.url).host;
    const bad = await rawRequest(service.url, `POST /v1/responses HTTP/1.1\r\nHost: ${host}\r\nContent-Length: abc\r\n\r\n{}`);
    assert.equal(bad.status, 400);
    assert.equal(errorCode(bad.body), 'invalid_request');
    const garbage = await rawRequest(service.url, 'NOT HTTP AT ALL\r\n\r\n');
    assert.equal(garbage.status, 400);
    assert.equal(errorCode(garbage.body), 'invalid_request');
    assert.equal((await fetch(`${service.url}/healthz`)).status, 200);
  }));

  test('a request pipelined before bytes that are not HTTP gets its own answer first, then the 400', () => withService({}, async (service) => {
    const host = new URL(service.url).host;
    const body = JSON.stringify({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
    const post = `POST /v1/responses HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${service.token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const text = await allBytes(service.url, `${post}GARBAGE\r\n\r\n`);
    const answers = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => Number(match[1]));
    assert.deepEqual(answers, [200, 400], text.slice(0, 400));
    assert.match(text, /"object":"response","created_at"/);
    const tasks = await (await api(service, '/v1/tasks')).json() as { data: Array<{ status: string }> };
    assert.deepEqual(tasks.data.map((task) => task.status), ['completed'], 'the response the client was answered for ran to its end');
  }));

  test('what Node answers by itself is answered in the LMSP shape: an unknown Expect is ignored, CONNECT is 404 (421 for a host not served)', () => withService({}, async (service) => {
    const host = new URL(service.url).host;
    const expect = await rawRequest(service.url, `GET /v1/service HTTP/1.1\r\nHost: ${host}\r\nExpect: weird\r\nConnection: close\r\n\r\n`);
    assert.equal(expect.status, 200);
    const elsewhere = await rawRequest(service.url, 'GET /v1/service HTTP/1.1\r\nHost: evil.example\r\nExpect: weird\r\nConnection: close\r\n\r\n');
    assert.equal(elsewhere.status, 421, 'the Host check is not skipped');
    assert.equal(errorCode(elsewhere.body), 'misdirected_request');
    const connect = await rawRequest(service.url, `CONNECT ${host} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    assert.equal(connect.status, 404);
    assert.equal(errorCode(connect.body), 'not_found');
    // A path as its target (as `curl -X CONNECT http://host/path` sends): the Host header is the host.
    const withPath = await rawRequest(service.url, `CONNECT /v1/tasks HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    assert.equal(withPath.status, 404, withPath.body);
    assert.equal(errorCode(withPath.body), 'not_found');
    const withPathElsewhere = await rawRequest(service.url, 'CONNECT /v1/tasks HTTP/1.1\r\nHost: evil.example\r\n\r\n');
    assert.equal(withPathElsewhere.status, 421);
    assert.match(withPathElsewhere.body, /The Host 'evil\.example' is not served here/);
    // The Host header is checked beside an authority target, and is given once.
    const hostElsewhere = await rawRequest(service.url, `CONNECT ${host} HTTP/1.1\r\nHost: evil.example\r\n\r\n`);
    assert.equal(hostElsewhere.status, 421);
    assert.match(hostElsewhere.body, /The Host 'evil\.example' is not served here/);
    const twoHosts = await rawRequest(service.url, `CONNECT /v1/models HTTP/1.1\r\nHost: ${host}\r\nHost: evil.example\r\n\r\n`);
    assert.equal(twoHosts.status, 400);
    assert.deepEqual(JSON.parse(twoHosts.body), JSON.parse((await rawRequest(service.url, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nHost: evil.example\r\nConnection: close\r\n\r\n`)).body),
      'the same error as for any other method');
    // The Host check comes first for CONNECT too: its target names the host it asks for.
    const proxied = await rawRequest(service.url, 'CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n');
    assert.equal(proxied.status, 421);
    assert.equal(errorCode(proxied.body), 'misdirected_request');
    assert.equal((await fetch(`${service.url}/healthz`)).status, 200);
  }));

  test('GET * (the asterisk form, for OPTIONS alone) names no route; an absolute URL is read as its path', () => withService({}, async (service) => {
    const host = new URL(service.url).host;
    const asterisk = await rawRequest(service.url, `GET * HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    assert.equal(asterisk.status, 404, 'GET * is not the dashboard');
    assert.equal(errorCode(asterisk.body), 'not_found');
    const absolute = await rawRequest(service.url, `GET http://${host}/v1/service HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    assert.equal(absolute.status, 200);
    assert.equal((JSON.parse(absolute.body) as { object: string }).object, 'service');
  }));

  test('two Authorization headers are no credentials at all: 401, whichever comes first', () => withService({}, async (service) => {
    const host = new URL(service.url).host;
    for (const [first, second] of [[service.token, 'bad'], ['bad', service.token]]) {
      const answer = await rawRequest(service.url, `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${first}\r\nAuthorization: Bearer ${second}\r\nConnection: close\r\n\r\n`);
      assert.equal(answer.status, 401);
      assert.equal(errorCode(answer.body), 'invalid_token');
    }
  }));
});

/** Everything the service writes on one connection until it closes it. */
function allBytes(url: string, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname, () => socket.write(request));
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
    socket.setTimeout(30_000, () => socket.destroy(new Error(`no close after 30 s: ${text.slice(0, 200)}`)));
  });
}

describe('timeouts chosen on purpose', () => {
  test('a client that never finishes its headers is answered 408 and cut off, within seconds', { timeout: 60_000 }, () => withService({}, async (service) => {
    const socket = await openSocket(service.url);
    try {
      const started = Date.now();
      const answer = await exchange(socket, `GET /healthz HTTP/1.1\r\nHost: ${new URL(service.url).host}\r\nX-Slow: 1`, 30_000);
      assert.equal(answer.status, 408);
      assert.equal(errorCode(answer.body), 'request_timeout');
      assert.ok(Date.now() - started < 25_000, 'bounded by the headers timeout, not left open');
    } finally {
      socket.destroy();
    }
  }));

  test('an idle kept-alive connection outlives the client pools\' own keep-alive (undici 4 s, Node 5 s)', { timeout: 60_000 }, () => withService({}, async (service) => {
    const host = new URL(service.url).host;
    const socket = await openSocket(service.url);
    try {
      const first = await exchange(socket, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      assert.equal(first.status, 200);
      assert.match(first.headers['keep-alive'] ?? '', /timeout=75/);
      await new Promise((resolve) => setTimeout(resolve, 6_000)); // idle on purpose: the thing under test
      assert.ok(!socket.destroyed, 'still open after 6 s idle');
      const second = await exchange(socket, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      assert.equal(second.status, 200);
    } finally {
      socket.destroy();
    }
  }));

  test('an event stream asked with Connection: close closes the connection after its terminal event (RFC 9112 9.6)', () =>
    withService({}, async (service) => {
      const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 3 });
      const { host } = new URL(service.url);
      const socket = await openSocket(service.url);
      try {
        const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
        const answer = await exchange(socket, `GET /v1/tasks/${created.body.task.id}/events?stream=true HTTP/1.1\r\nHost: ${host}\r\n`
          + `Authorization: Bearer ${service.token}\r\nConnection: close\r\n\r\n`);
        assert.equal(answer.status, 200);
        assert.equal(answer.headers.connection, 'close');
        assert.match(answer.body, /event: response\.incomplete/);
        await Promise.race([closed, new Promise((_, reject) => setTimeout(() => reject(new Error('the connection stayed open')), 5000))]);
      } finally {
        socket.destroy();
      }
    }));
});

describe('open connections are capped (--max-connections)', () => {
  const healthz = (host: string) => `GET /healthz HTTP/1.1\r\nHost: ${host}\r\n\r\n`;

  test('past the cap a new connection is closed at once, counted and logged; the held ones go on, and a freed place is taken', () =>
    // Raw sockets only: fetch's pool would keep connections of its own open, taking places.
    withService({ args: ['--max-connections', '3'] }, async (service) => {
      const host = new URL(service.url).host;
      const held: Socket[] = [];
      try {
        for (let i = 0; i < 3; i++) {
          const socket = await openSocket(service.url);
          held.push(socket);
          assert.equal((await exchange(socket, healthz(host))).status, 200, `kept-alive connection ${i + 1}`);
        }
        const extra = await openSocket(service.url);
        extra.on('error', () => undefined); // the reset is what is looked for, read below
        const answer = await exchange(extra, healthz(host), 5_000).catch((error: NodeJS.ErrnoException) => error);
        extra.destroy();
        // Reset, or closed without a word, as the request crosses the close.
        if (answer instanceof Error) assert.equal(answer.code, 'ECONNRESET');
        else assert.deepEqual([answer.status, answer.closed], [0, true], 'no answer on a connection past the cap, and closed');
        assert.equal((await exchange(held[0]!, healthz(host))).status, 200, 'a held connection still answers');
        held.shift()!.destroy();
        const scrape = await waitFor(async () => {
          const socket = await openSocket(service.url);
          socket.on('error', () => undefined);
          try {
            const scraped = await exchange(socket, `GET /metrics HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${service.token}\r\nConnection: close\r\n\r\n`)
              .catch(() => null);
            return scraped?.status === 200 ? scraped.body : null;
          } finally {
            socket.destroy();
          }
        }, { what: 'a scrape once a place is free' });
        assert.match(scrape, /^lmsp_http_connections_dropped_total [1-9]\d*$/m);
        assert.match(service.output(), /a new connection was closed at once: 3 are open, the most --max-connections allows/);
      } finally {
        for (const socket of held) socket.destroy();
      }
    }));

  test('the cap fits under the open-file limit, which is read from /proc/self/limits', () => {
    const folder = mkdtempSync(join(tmpdir(), 'lmsp-limits-'));
    const limits = (soft: string) => {
      const file = join(folder, `limits-${soft}`);
      writeFileSync(file, 'Limit                     Soft Limit           Hard Limit           Units     \n'
        + 'Max processes             63432                63432                processes \n'
        + `Max open files            ${soft}                 524288               files     \n`);
      return file;
    };
    assert.equal(openFileLimit(limits('1024')), 1024);
    assert.equal(openFileLimit(limits('unlimited')), null, 'unlimited is no limit');
    assert.equal(openFileLimit(join(folder, 'absent')), null, 'unknown where the file is missing (not Linux)');
    // auto (0): all the limit leaves, so that shutting clients out takes as many connections as without a cap.
    assert.equal(connectionCap(0, 20_000), 20_000 - RESERVED_FILES);
    assert.equal(connectionCap(0, null), null, 'no cap where no limit is known');
    assert.equal(connectionCap(4096, null), 4096);
    assert.equal(connectionCap(4096, 1_048_576), 4096);
    assert.equal(connectionCap(4096, 1024), 1024 - RESERVED_FILES, 'lowered to leave the service its own files');
    assert.equal(connectionCap(4096, 100), 16, 'never below a few connections');
    assert.equal(connectionCap(10, 1024), 10);
  });
});
