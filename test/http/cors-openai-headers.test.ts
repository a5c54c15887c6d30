/**
 * LMSP 2: CORS headers go to allowed origins. A page of such an origin that uses the `openai`
 * package (LMSP: existing OpenAI clients work unchanged) sends the package's own headers
 * (`X-Stainless-*`), so the preflight must allow every header the browser asks for.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI from 'openai';
import { withService } from '../helpers/service.js';

const ORIGIN = 'http://app.example:3000';

describe('CORS preflight of an allowed origin (LMSP section 2)', () => {
  test('allows the headers the openai package sends, so a page of an allowed origin can use it', { timeout: 60_000 }, () =>
    withService({ args: ['--allowed-origins', ORIGIN] }, async (service) => {
      let sent: string[] = [];
      const openai = new OpenAI({
        baseURL: `${service.url}/v1`, apiKey: service.token, maxRetries: 0,
        fetch: (url, init) => {
          sent = [...new Headers(init?.headers).keys()];
          return fetch(url, init);
        },
      });
      await openai.responses.create({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 1 });
      // What a browser asks before sending them: every header but those it sets itself.
      const asked = sent.filter((name) => !['user-agent', 'content-length', 'accept-encoding', 'connection', 'host'].includes(name));
      assert.ok(asked.some((name) => name.startsWith('x-stainless-')), `the package's own headers: ${asked.join(', ')}`);
      const preflight = await fetch(`${service.url}/v1/responses`, {
        method: 'OPTIONS',
        headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': asked.join(',') },
      });
      assert.equal(preflight.status, 204);
      assert.equal(preflight.headers.get('access-control-allow-origin'), ORIGIN);
      const allowed = (preflight.headers.get('access-control-allow-headers') ?? '').split(',').map((name) => name.trim().toLowerCase());
      for (const name of asked) assert.ok(allowed.includes(name), `${name} is allowed (allowed: ${allowed.join(', ')})`);
      for (const name of ['authorization', 'content-type', 'idempotency-key', 'last-event-id']) assert.ok(allowed.includes(name), name);

      const other = await fetch(`${service.url}/v1/responses`, {
        method: 'OPTIONS',
        headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': asked.join(',') },
      });
      assert.equal(other.status, 403, 'another origin gets no CORS at all');
      assert.equal(other.headers.get('access-control-allow-headers'), null);
    }));

  test('an error the router answers before any route (a malformed URL) carries the CORS headers too', { timeout: 60_000 }, () =>
    withService({ args: ['--allowed-origins', ORIGIN] }, async (service) => {
      const answer = await fetch(`${service.url}/v1/tasks/%ff`, { headers: { origin: ORIGIN, authorization: `Bearer ${service.token}` } });
      assert.equal(answer.status, 400);
      assert.equal(answer.headers.get('access-control-allow-origin'), ORIGIN, 'the page can read why');
    }));
});
