/**
 * Every answer names its request in `x-request-id`, as OpenAI's API does: the `openai` package
 * shows it as `_request_id` on results and `requestID` on errors, so a user can quote it and an
 * operator can find the request's lines in the log. It is on every kind of answer: JSON, errors
 * of the routes and of the checks before them, event streams, and readable by allowed pages.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI from 'openai';
import { rawRequest } from '../helpers/raw-http.js';
import { api, withService } from '../helpers/service.js';

const REQUEST_ID = /^req_[0-9A-Za-z]{32}$/;
const ORIGIN = 'http://app.example:3000';

describe('x-request-id', () => {
  test('on results, errors, refusals before any route and event streams; a new one for each request', { timeout: 60_000 }, () =>
    withService({ args: ['--allowed-origins', ORIGIN] }, async (service) => {
      const seen = new Set<string>();
      const idOf = (response: Response, what: string): string => {
        const id = response.headers.get('x-request-id');
        assert.match(id ?? '(none)', REQUEST_ID, what);
        assert.ok(!seen.has(id!), `${what}: a request id was used twice`);
        seen.add(id!);
        return id!;
      };

      const openai = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: service.token, maxRetries: 0 });
      const created = await openai.responses.create({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
      assert.match(created._request_id ?? '(none)', REQUEST_ID);
      const refused = await openai.responses.create({ model: 'no-such-model', input: 'x' }).then(() => null, (error: unknown) => error);
      assert.ok(refused instanceof OpenAI.NotFoundError, String(refused));
      assert.match(refused.requestID ?? '(none)', REQUEST_ID);
      assert.notEqual(refused.requestID, created._request_id);

      idOf(await api(service, '/v1/service'), 'a result');
      idOf(await api(service, '/v1/nothing-here'), 'an unknown route');
      idOf(await fetch(`${service.url}/v1/service`), 'a missing token');
      idOf(await fetch(`${service.url}/v1/service`, { headers: { host: 'evil.example' } }), 'a refused Host');
      idOf(await api(service, '/v1/responses/%E0%A4%A'), 'a malformed URL');
      idOf(await api(service, '/v1/responses', { method: 'POST', body: '{', headers: { 'content-type': 'application/json' } }), 'a body that is not JSON');
      // What Node's parser refuses is answered on the socket, before Fastify, and named too.
      const { port } = new URL(service.url);
      for (const [request, status] of [
        [`GET /v1/service HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Big: ${'a'.repeat(17_000)}\r\n\r\n`, 431],
        ['GARBAGE\r\n\r\n', 400],
        [`CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`, 404],
      ] as const) {
        const answer = await rawRequest(service.url, request);
        assert.equal(answer.status, status, request.slice(0, 20));
        const id = answer.headers['x-request-id'];
        assert.match(id ?? '(none)', REQUEST_ID, `the answer ${status}`);
        assert.ok(!seen.has(id!), 'a request id was used twice');
        seen.add(id!);
      }
      const stream = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', max_output_tokens: 2, stream: true } });
      assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
      idOf(stream, 'an event stream');
      await stream.text();

      // A page of an allowed origin may read it.
      const page = await fetch(`${service.url}/v1/service`, { headers: { authorization: `Bearer ${service.token}`, origin: ORIGIN } });
      idOf(page, 'an answer to an allowed page');
      const exposed = (page.headers.get('access-control-expose-headers') ?? '').split(',').map((name) => name.trim());
      assert.ok(exposed.includes('x-request-id'), exposed.join(', '));
    }));
});
