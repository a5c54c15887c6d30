/**
 * The model registry's answers as a client sees them (LMSP 5): the same 404 for an unknown id on
 * every route, and a broken link in the models directory that says nothing about what exists
 * outside it.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { makeDataDir } from '../helpers/data-dir.js';
import { api, withService } from '../helpers/service.js';

interface ErrorBody { error: { type: string; code: string; message: string; param: string | null } }

describe('model registry edges (LMSP 5)', () => {
  test('an unknown model id is the same 404 model_not_found on GET, DELETE and verify', () => withService({}, async (service) => {
    const answers: string[] = [];
    for (const [method, path] of [['GET', '/v1/models/no-such-model'], ['DELETE', '/v1/models/no-such-model'], ['POST', '/v1/models/no-such-model/verify']] as const) {
      const response = await api(service, path, { method });
      assert.equal(response.status, 404, `${method} ${path}`);
      const body = (await response.json()) as ErrorBody;
      assert.equal(body.error.code, 'model_not_found');
      answers.push(JSON.stringify(body));
    }
    assert.equal(new Set(answers).size, 1, `one answer for all:\n${answers.join('\n')}`);
    assert.equal((JSON.parse(answers[0]!) as ErrorBody).error.param, 'id');
  }));

  test('a model id of the longest allowed length (128) is read, verified and removed by its id', () => withService({}, async (service) => {
    const id = `m${'0123456789:._-'.repeat(10)}`.slice(0, 128);
    assert.equal(id.length, 128);
    copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'long.gguf'));
    assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'long.gguf', id } })).status, 201);
    for (const path of [`/v1/models/${id}`, `/v1/models/${encodeURIComponent(id)}`]) {
      const read = await api(service, path);
      assert.equal(read.status, 200, path);
      assert.equal(((await read.json()) as { id: string }).id, id);
    }
    assert.equal((await api(service, `/v1/models/${encodeURIComponent(id)}/verify`, { method: 'POST' })).status, 200);
    assert.equal((await api(service, `/v1/models/${encodeURIComponent(id)}`, { method: 'DELETE' })).status, 200);
    // One character more is no model id: the same 404 as any unknown model.
    const longer = await api(service, `/v1/models/${id}x`);
    assert.equal(longer.status, 404);
    assert.equal(((await longer.json()) as ErrorBody).error.code, 'model_not_found');
  }));

  test('POST /v1/models takes id: null as absent: the id comes from the file name', () => withService({}, async (service) => {
    copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'Null-Id.gguf'));
    const response = await api(service, '/v1/models', { method: 'POST', json: { path: 'Null-Id.gguf', id: null } });
    assert.equal(response.status, 201, await response.clone().text());
    assert.equal(((await response.json()) as { id: string }).id, 'null-id');
  }));

  test('a folder is refused as any unusable file is: 400 invalid_model_file with the documented prefix', () => withService({}, async (service) => {
    mkdirSync(join(service.dataDir, 'models', 'folder.gguf'));
    const response = await api(service, '/v1/models', { method: 'POST', json: { path: 'folder.gguf', id: 'folder' } });
    assert.equal(response.status, 400);
    assert.deepEqual((await response.json() as { error: unknown }).error, {
      type: 'invalid_request_error', code: 'invalid_model_file', param: 'path',
      message: 'The file is not a usable GGUF model: the path does not name a regular file',
    });
  }));

  test('a broken link to outside the models directory answers the same whether its target exists or not', () => withService({}, async (service) => {
    const outside = makeDataDir('outside-links');
    const models = join(service.dataDir, 'models');
    writeFileSync(join(outside, 'exists.gguf'), 'GGUF');
    symlinkSync(join(outside, 'exists.gguf'), join(models, 'to-existing.gguf'));
    symlinkSync(join(outside, 'missing.gguf'), join(models, 'to-missing.gguf'));
    symlinkSync(join(outside, 'no-such-folder'), join(models, 'to-missing-folder'));
    symlinkSync('to-missing.gguf', join(models, 'chain.gguf'));
    const answers: string[] = [];
    for (const path of ['to-existing.gguf', 'to-missing.gguf', 'to-missing-folder/x.gguf', 'chain.gguf']) {
      const response = await api(service, '/v1/models', { method: 'POST', json: { path, id: 'linked' } });
      assert.equal(response.status, 400, path);
      answers.push(JSON.stringify(await response.json()));
    }
    assert.equal(new Set(answers).size, 1, `one answer for all:\n${answers.join('\n')}`);
    assert.match(answers[0]!, /must lie inside the models directory/);
    // A broken link that stays inside is a missing file, named as such.
    symlinkSync('gone.gguf', join(models, 'to-gone.gguf'));
    const inside = await api(service, '/v1/models', { method: 'POST', json: { path: 'to-gone.gguf' } });
    assert.match(((await inside.json()) as ErrorBody).error.message, /no file at to-gone\.gguf/);
    rmSync(outside, { recursive: true, force: true });
  }));
});
