/**
 * LMSP 2: every error is an HTTP status and `{error: {type, code, message, param}}`. URLs that the
 * router refuses before any route runs (a broken percent-encoding, a path segment longer than
 * any id) answered in Fastify's own shape instead.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { rawGet } from '../helpers/raw-http.js';
import { api, withService } from '../helpers/service.js';

interface ErrorAnswer {
  error: { type: string; code: string; message: string; param: string | null };
}

function assertLmspError(body: unknown, code: string): void {
  const error = (body as ErrorAnswer).error;
  assert.equal(typeof error, 'object', JSON.stringify(body));
  assert.deepEqual(Object.keys(error).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(error.code, code, JSON.stringify(body));
}

describe('URLs the router refuses (LMSP section 2)', () => {
  test('a malformed percent-encoding is 400 invalid_request, a path segment longer than any id 404 not_found, both in the LMSP shape', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      for (const path of ['/v1/tasks/%ff', '/v1/responses/%E0%A4%A/cancel', '/v1/tasks/%zz/events']) {
        const answer = await api(service, path, path.endsWith('cancel') ? { method: 'POST' } : {});
        assert.equal(answer.status, 400, path);
        assertLmspError(await answer.json(), 'invalid_request');
      }
      for (const path of [`/v1/tasks/task_${'a'.repeat(600)}`, `/v1/responses/resp_${'b'.repeat(400)}/input_items`]) {
        const answer = await api(service, path);
        assert.equal(answer.status, 404, path);
        assertLmspError(await answer.json(), 'not_found');
      }
    }));

  test('the Host and Origin checks still come first: a rebound name gets 421, a foreign page 403', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const { port } = new URL(service.url);
      for (const path of ['/v1/tasks/%ff', `/v1/tasks/task_${'a'.repeat(600)}`]) {
        const rebound = await rawGet(service.url, path, { Host: `evil.example:${port}` });
        assert.equal(rebound.status, 421, path);
        assertLmspError(JSON.parse(rebound.body), 'misdirected_request');
        const foreign = await rawGet(service.url, path, { Host: `127.0.0.1:${port}`, Origin: 'http://evil.example' });
        assert.equal(foreign.status, 403, path);
        assertLmspError(JSON.parse(foreign.body), 'origin_not_allowed');
      }
    }));
});
