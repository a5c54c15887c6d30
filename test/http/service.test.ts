import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { api, withService } from '../helpers/service.js';

describe('service identity (LMSP section 3)', () => {
  test('GET /v1/service needs no token and keeps its id across restarts', () => withService({}, async (service) => {
    const response = await fetch(`${service.url}/v1/service`);
    assert.equal(response.status, 200);
    const body = await response.json() as Record<string, unknown>;
    assert.equal(body.object, 'service');
    assert.equal(body.protocol, 'lmsp');
    assert.equal(body.protocol_version, '1.0');
    assert.match(String(body.id), /^svc_[0-9A-Za-z]{24,}$/);
    assert.deepEqual(body.capabilities, {
      background: true, stream: true, resume: true, idempotency: true, chat_completions: true,
      embeddings: false, structured_output: true, tools: true, model_pull: true,
    });
    assert.deepEqual(Object.keys(body.software as object).sort(), ['name', 'version']);
    assert.equal(typeof body.name, 'string');
    await service.kill();
    const again = await service.restart();
    const second = await (await fetch(`${again.url}/v1/service`)).json() as Record<string, unknown>;
    assert.equal(second.id, body.id);
  }));

  test('GET /healthz answers once recovered; --name is shown', () => withService({ args: ['--name', 'kitchen-box'] }, async (service) => {
    const health = await fetch(`${service.url}/healthz`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok' });
    assert.equal(((await (await api(service, '/v1/service')).json()) as { name: string }).name, 'kitchen-box');
  }));

  test('the default bind address is loopback', () => withService({}, async (service) => {
    assert.match(service.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  }));
});
