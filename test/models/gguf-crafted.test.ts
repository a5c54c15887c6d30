/**
 * LMSP 5, "no file can crash the service, hang it, or make it allocate more than a small multiple
 * of the file's size": the two crafted files that once did (a 35-byte file whose key declares
 * 3.5e9 bytes killed the service; a 53-byte file declaring a 2^33-item array grew it to 1.2 GB)
 * are refused by the validator, by `POST /v1/models` and by `lmsp models add`, and a registered
 * file that changes on disk is validated again before a runner loads it.
 */
import assert from 'node:assert/strict';
import { copyFileSync, openSync, readFileSync, statSync, utimesSync, writeSync, closeSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ServiceError } from '../../src/domain/errors.js';
import type { ModelObject } from '../../src/api/types.js';
import { validateGgufFile } from '../../src/models/gguf-validator.js';
import { runCli } from '../helpers/cli.js';
import { makeDataDir, withDataDir } from '../helpers/data-dir.js';
import { craftedHugeArray, craftedHugeString, mapHeader, writeModel } from '../helpers/gguf.js';
import { api, withService, type TestService } from '../helpers/service.js';

const CRAFTED = [
  { name: 'huge-string.gguf', bytes: craftedHugeString, message: /metadata key #0 at byte 24 declares 3500000000 bytes but only 3 remain/ },
  { name: 'huge-array.gguf', bytes: craftedHugeArray, message: /the array "x.arr" at byte 41 declares 8589934592 items of uint8, at least 8589934592 bytes, but only 0 remain/ },
];

/** Resident memory of a process in bytes (Linux /proc). */
function residentBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((entry) => entry.startsWith('VmRSS:'))!;
  return Number(line.split(/\s+/)[1]) * 1024;
}

/** The service answers /healthz and its process is the one that started. */
async function assertAlive(service: TestService): Promise<void> {
  const health = await fetch(`${service.url}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: 'ok' });
  assert.equal(service.child.exitCode, null);
  assert.equal(service.child.signalCode, null);
}

describe('crafted GGUF files (LMSP 5: a model file is untrusted input)', () => {
  test('the validator refuses both crafted files, naming the field', () => withDataDir(async (dir) => {
    for (const crafted of CRAFTED) {
      const bytes = crafted.bytes();
      const path = writeModel(dir, crafted.name, bytes);
      assert.equal(statSync(path).size, crafted.name === 'huge-string.gguf' ? 35 : 53);
      await assert.rejects(validateGgufFile(path), (error: unknown) => {
        assert.ok(error instanceof ServiceError);
        assert.equal(error.code, 'invalid_model_file');
        assert.match(error.message, crafted.message);
        assert.ok(!error.message.includes(dir));
        return true;
      });
    }
  }, 'gguf-crafted'));

  test('POST /v1/models answers 400 invalid_model_file without a path, and the service lives on', () => withService({}, async (service) => {
    const models = join(service.dataDir, 'models');
    const before = residentBytes(service.pid);
    for (const crafted of CRAFTED) {
      writeModel(models, crafted.name, crafted.bytes());
      const response = await api(service, '/v1/models', { method: 'POST', json: { path: crafted.name } });
      assert.equal(response.status, 400);
      const { error } = (await response.json()) as { error: { code: string; param: string; message: string } };
      assert.equal(error.code, 'invalid_model_file');
      assert.equal(error.param, 'path');
      assert.match(error.message, crafted.message);
      assert.ok(!error.message.includes(service.dataDir) && !error.message.includes(crafted.name), `no path in "${error.message}"`);
      await assertAlive(service);
    }
    // The 53-byte file once grew the service by more than a gigabyte.
    const grown = residentBytes(service.pid) - before;
    assert.ok(grown < 128 * 1024 * 1024, `the service grew by ${grown} bytes`);
    assert.deepEqual((await service.client.listModels()).map((model) => model.id), ['lmsp-tiny']);
  }));

  test('lmsp models add refuses them with the same message and exits normally', () => withService({}, async (service) => {
    const outside = makeDataDir('gguf-crafted-cli');
    for (const crafted of CRAFTED) {
      const path = writeModel(outside, crafted.name, crafted.bytes());
      const added = await runCli(['models', 'add', path, '--data-dir', service.dataDir]);
      assert.equal(added.code, 1, added.stderr);
      assert.match(added.stderr, crafted.message);
    }
    await assertAlive(service);
    rmSync(outside, { recursive: true, force: true });
  }));

  test('a registered file that changes keeping its size and modification time is hashed again and never reaches the engine', () => withService({}, async (service) => {
    const path = join(service.dataDir, 'models', 'changing.gguf');
    copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), path);
    // Whole seconds, so that setting the time back is exact.
    const time = Math.floor(Date.now() / 1000) - 60;
    utimesSync(path, time, time);
    const created = await api(service, '/v1/models', { method: 'POST', json: { path: 'changing.gguf', id: 'changing' } });
    assert.equal(created.status, 201);
    // The key of general.name now declares 3.5e9 bytes: the shape of the 35-byte crash.
    const key = mapHeader(readFileSync(path)).keys.get('general.name')!;
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(3_500_000_000n);
    const fd = openSync(path, 'r+');
    writeSync(fd, length, 0, 8, key.at);
    closeSync(fd);
    utimesSync(path, time, time);
    const answer = await service.client.createResponse({ model: 'changing', input: 'hi', max_output_tokens: 3 });
    assert.equal(answer.body.status, 'failed');
    // Its change time and inode tell (LMSP 5: re-hashed on any change), though `touch` set its mtime back.
    assert.equal(answer.body.error?.code, 'model_digest_mismatch');
    assert.ok(!answer.body.error!.message.includes(service.dataDir));
    assert.equal((await service.client.getModel('changing') as ModelObject).status, 'digest_mismatch');
    await assertAlive(service);
    // The built-in model still serves.
    const tiny = await service.client.createResponse({ model: 'lmsp-tiny', input: 'hi', max_output_tokens: 3 });
    assert.equal(tiny.body.status, 'incomplete');
  }));
});
