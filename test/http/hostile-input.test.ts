/**
 * LMSP sections 2 and 5: malformed input of every kind gets the documented 400, never a 5xx,
 * and no answer leaks where files are.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { ResponseObject } from '../../src/api/types.js';
import { withoutPaths } from '../../src/tasks/scheduler.js';
import { api, errorOf, pairClient, withService } from '../helpers/service.js';

describe('hostile input (LMSP sections 2, 5)', () => {
  test('JSON nested deeper than 64 levels is a 400 invalid_json, with or without an Idempotency-Key, on /v1/pair too', () =>
    withService({}, async (service) => {
      const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
      for (const path of ['/v1/responses', '/v1/pair']) {
        for (const key of [undefined, 'deep-key']) {
          const response = await fetch(service.url + path, {
            method: 'POST',
            headers: { authorization: `Bearer ${service.token}`, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
            body: deep,
          });
          assert.equal(response.status, 400, `${path} ${key ?? ''}`);
          assert.equal((await errorOf(response)).code, 'invalid_json');
        }
      }
      const nest = (depth: number) => `{"model":"lmsp-tiny","input":"x","metadata":null,"extra":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;
      const at64 = await api(service, '/v1/responses', { method: 'POST', body: nest(64), headers: { 'content-type': 'application/json' } });
      assert.notEqual(at64.status, 400, '64 levels are fine (the unknown field is ignored)');
      const at65 = await api(service, '/v1/responses', { method: 'POST', body: nest(65), headers: { 'content-type': 'application/json' } });
      assert.equal(at65.status, 400);
      assert.doesNotMatch(service.output(), /Maximum call stack|RangeError/, 'nothing recursed itself to death');
      assert.equal((await fetch(`${service.url}/healthz`)).status, 200);
    }));

  test('Last-Event-ID must be a decimal integer', () => withService({}, async (service) => {
    const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 3 });
    const taskPath = `/v1/tasks/${created.body.task.id}/events?stream=true`;
    const responsePath = `/v1/responses/${created.body.id}?stream=true`;
    for (const path of [taskPath, responsePath]) {
      for (const value of ['', '0x10', '-1', '1.5', '3e2', 'abc']) {
        const response = await api(service, path, { headers: { 'last-event-id': value } });
        assert.equal(response.status, 400, `Last-Event-ID '${value}' on ${path}`);
        const error = await errorOf(response);
        assert.equal(error.code, 'invalid_request');
        assert.equal(error.param, 'Last-Event-ID');
      }
      const fine = await api(service, path, { headers: { 'last-event-id': '2' } });
      assert.equal(fine.status, 200);
      const text = await fine.text();
      assert.doesNotMatch(text, /^id: [12]$/m, 'the replay starts after event 2');
      assert.match(text, /^id: 3$/m);
    }
  }));

  test('integers in a query string are decimal digits, and a field given twice is refused, each a 400 naming it', () => withService({}, async (service) => {
    await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
    for (const route of ['/v1/tasks', '/v1/clients', '/v1/chat/completions']) {
      for (const value of ['0x1', '1e0', '+1', '%201', '1.0', '1.5', 'abc', '']) {
        const response = await api(service, `${route}?limit=${value}`);
        assert.equal(response.status, 400, `limit=${value} on ${route}`);
        const error = await errorOf(response);
        assert.deepEqual([error.code, error.param], ['invalid_request', 'limit'], `limit=${value} on ${route}`);
      }
      const twice = await api(service, `${route}?limit=1&limit=1`);
      assert.equal(twice.status, 400);
      const error = await errorOf(twice);
      assert.equal(error.param, 'limit');
      assert.match(error.message, /more than once/);
      for (const value of ['1', '01', '001']) {
        const fine = await api(service, `${route}?limit=${value}`);
        assert.equal(fine.status, 200, `limit=${value} on ${route}`);
        assert.ok(((await fine.json()) as { data: unknown[] }).data.length <= 1);
      }
    }
    const ordered = await api(service, '/v1/tasks?order=asc&order=asc');
    assert.equal(ordered.status, 400);
    assert.equal((await errorOf(ordered)).param, 'order');
  }));

  test('POST /v1/models tells nothing of files outside the models directory, nor where that directory is', () => withService({}, async (service) => {
    const outside = mkdtempSync(join(tmpdir(), 'lmsp-outside-'));
    try {
      const existing = join(outside, 'secret.gguf');
      writeFileSync(existing, 'not a model');
      const answers = [];
      for (const path of [existing, join(outside, 'missing.gguf'), '../../../etc/hostname', '/etc/passwd']) {
        const response = await api(service, '/v1/models', { method: 'POST', json: { path } });
        assert.equal(response.status, 400, path);
        answers.push(await errorOf(response));
      }
      assert.equal(new Set(answers.map((answer) => answer.message)).size, 1, 'existing and missing files outside look the same');
      for (const answer of answers) {
        assert.equal(answer.param, 'path');
        assert.ok(!answer.message.includes(service.dataDir) && !answer.message.includes('/models'), `no path in: ${answer.message}`);
      }
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  }));

  test('a task error shown to a client without models:write holds no file-system path', () => withService({}, async (service) => {
    const copy = join(service.dataDir, 'models', 'copy.gguf');
    copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), copy);
    assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'copy.gguf', id: 'copy' } })).status, 201);
    rmSync(copy);
    const client = await pairClient(service, ['responses']);
    const answer = await client.client.createResponse({ model: 'copy', input: 'x', max_output_tokens: 3 });
    const response = answer.body as ResponseObject;
    assert.equal(response.status, 'failed');
    assert.equal(response.error?.code, 'model_not_found');
    assert.doesNotMatch(response.error!.message, /\//, `no path in: ${response.error!.message}`);
    const task = await client.client.getTask(response.task.id);
    assert.doesNotMatch(task.error!.message, /\//);
  }));

  test('engine messages lose their paths before they become a task error', () => {
    assert.equal(withoutPaths('failed to load model from /home/a/.local/share/lmsp/models/x.gguf: bad magic'),
      'failed to load model from <file>: bad magic');
    assert.equal(withoutPaths('C:\\Users\\a\\models\\x.gguf is gone'), '<file> is gone');
    assert.equal(withoutPaths('the runner process exited with code 1'), 'the runner process exited with code 1');
  });
});
