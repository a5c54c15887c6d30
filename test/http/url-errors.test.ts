/**
 * LMSP 2: every error is an HTTP status and `{error: {type, code, message, param}}`. URLs that the
 * router refuses before any route runs (a broken percent-encoding) answered in Fastify's own shape
 * instead; a path segment longer than any id was refused there too, before the token was checked.
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
  test('a malformed percent-encoding is 400 invalid_request, an id longer than any id 404 not_found naming it, both in the LMSP shape', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      for (const path of ['/v1/tasks/%ff', '/v1/responses/%E0%A4%A/cancel', '/v1/tasks/%zz/events']) {
        const answer = await api(service, path, path.endsWith('cancel') ? { method: 'POST' } : {});
        assert.equal(answer.status, 400, path);
        assertLmspError(await answer.json(), 'invalid_request');
      }
      const longIds = [`task_${'a'.repeat(600)}`, `resp_${'b'.repeat(400)}`, `chatcmpl-${'c'.repeat(5000)}`];
      for (const [path, id] of [[`/v1/tasks/${longIds[0]}`, longIds[0]], [`/v1/responses/${longIds[1]}/input_items`, longIds[1]], [`/v1/chat/completions/${longIds[2]}`, longIds[2]]] as const) {
        // The token is checked before anything is looked up, as for any other id.
        assert.equal((await fetch(`${service.url}${path}`)).status, 401, path);
        const answer = await api(service, path);
        assert.equal(answer.status, 404, path);
        const body = await answer.json();
        assertLmspError(body, 'not_found');
        assert.notEqual((body as ErrorAnswer).error.param, null, path);
        assert.ok((body as ErrorAnswer).error.message.includes(id), path);
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
