import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PairingCodeObject } from '../../src/api/types.js';
import { api, withService } from '../helpers/service.js';

describe('POST /v1/pairing-codes without a body (LMSP 4; every field is optional, as a body-less OpenAI POST)', () => {
  test('makes a code with the defaults, as {} does; a key replays it', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const bare = await api(service, '/v1/pairing-codes', { method: 'POST' });
      assert.equal(bare.status, 201, await bare.clone().text());
      const code = (await bare.json()) as PairingCodeObject;
      assert.match(code.code, /^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$/);
      assert.deepEqual(code.scopes, ['responses', 'models:read']);

      const keyed = await api(service, '/v1/pairing-codes', { method: 'POST', headers: { 'idempotency-key': 'bare-code' } });
      assert.equal(keyed.status, 201);
      const again = await api(service, '/v1/pairing-codes', { method: 'POST', headers: { 'idempotency-key': 'bare-code' } });
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(((await again.json()) as PairingCodeObject).code, ((await keyed.json()) as PairingCodeObject).code);
      const empty = await api(service, '/v1/pairing-codes', { method: 'POST', json: {}, headers: { 'idempotency-key': 'bare-code' } });
      assert.equal(empty.status, 201, 'no body and {} are the same request');
    }));

  test('a body that is not an object, JSON null included, is 400 as on every route', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      for (const body of ['null', '[]', '"x"', '1']) {
        const answer = await api(service, '/v1/pairing-codes', { method: 'POST', body, headers: { 'content-type': 'application/json' } });
        assert.equal(answer.status, 400, body);
        const { error } = (await answer.json()) as { error: { code: string; param: string | null } };
        assert.equal(error.code, 'invalid_request', body);
        assert.equal(error.param, null, body);
      }
    }));

  test('a scope named twice is granted once, as lmsp pair --scopes does', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const answer = await api(service, '/v1/pairing-codes', { method: 'POST', json: { scopes: ['metrics', 'responses', 'metrics'] } });
      assert.equal(answer.status, 201, await answer.clone().text());
      assert.deepEqual(((await answer.json()) as PairingCodeObject).scopes, ['metrics', 'responses']);
    }));
});
