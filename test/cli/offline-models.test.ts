/**
 * The model commands without a running service (LMSP 5, 12): a data directory that only `lmsp
 * pair` has made lists the built-in model as a first `lmsp serve` would register it, and one the
 * operator removed stays removed.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { ModelObject } from '../../src/api/types.js';
import { runCli } from '../helpers/cli.js';
import { withDataDir } from '../helpers/data-dir.js';
import { withService } from '../helpers/service.js';

async function listed(dataDir: string): Promise<ModelObject[]> {
  const ls = await runCli(['models', 'ls', '--json', '--data-dir', dataDir]);
  assert.equal(ls.code, 0, ls.stderr);
  return (JSON.parse(ls.stdout) as { data: ModelObject[] }).data;
}

describe('lmsp models without a running service', () => {
  test('a data directory made by lmsp pair lists lmsp-tiny, with the digest the service gives it', { timeout: 90_000 }, () =>
    withDataDir(async (dataDir) => {
      const paired = await runCli(['pair', '--json', '--data-dir', dataDir]);
      assert.equal(paired.code, 0, paired.stderr);
      const offline = await listed(dataDir);
      assert.deepEqual(offline.map((model) => [model.id, model.status]), [['lmsp-tiny', 'ready']]);
      const verified = await runCli(['models', 'verify', 'lmsp-tiny', '--json', '--data-dir', dataDir]);
      assert.equal(verified.code, 0, verified.stderr);
      await withService({ dataDir }, async (service) => {
        const served = await service.client.listModels();
        assert.deepEqual(served.map((model) => [model.id, model.digest]), offline.map((model) => [model.id, model.digest]));
      });
    }));

  test('a file that no longer matches: verify exits 1 saying why on stderr; --json prints the model with its status', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      assert.equal((await runCli(['pair', '--data-dir', dataDir])).code, 0);
      assert.deepEqual((await listed(dataDir)).map((model) => model.status), ['ready']);
      const path = join(dataDir, 'models', 'lmsp-tiny.gguf');
      const bytes = readFileSync(path);
      bytes[bytes.length - 1] ^= 0xff;
      writeFileSync(path, bytes);
      const plain = await runCli(['models', 'verify', 'lmsp-tiny', '--data-dir', dataDir]);
      assert.equal(plain.code, 1);
      assert.equal(plain.stdout, 'lmsp-tiny: digest_mismatch\n');
      assert.match(plain.stderr, /^lmsp: model lmsp-tiny: its file no longer has the digest it was registered with \(sha256:[0-9a-f]{64}\)\n$/);
      const json = await runCli(['models', 'verify', 'lmsp-tiny', '--json', '--data-dir', dataDir]);
      assert.equal(json.code, 1);
      assert.equal((JSON.parse(json.stdout) as ModelObject).status, 'digest_mismatch');
      assert.match(json.stderr, /lmsp: model lmsp-tiny: its file no longer has the digest/);
      rmSync(path);
      const missing = await runCli(['models', 'verify', 'lmsp-tiny', '--data-dir', dataDir]);
      assert.equal(missing.code, 1);
      assert.equal(missing.stderr, 'lmsp: model lmsp-tiny: its file is missing\n');
    }));

  test('lmsp models add reads a path as the kernel does, and names the model by the name given', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      assert.equal((await runCli(['pair', '--data-dir', dataDir])).code, 0);
      assert.deepEqual((await listed(dataDir)).map((model) => model.id), ['lmsp-tiny'], 'the built-in model is written');
      const models = join(dataDir, 'models');
      mkdirSync(join(models, 'sub'));
      copyFileSync(join(models, 'lmsp-tiny.gguf'), join(models, 'real.gguf'));
      // `elsewhere/deep/..` is the models directory to the kernel (deep leads to models/sub), and
      // `elsewhere` to a reading of the text, where there is no file.
      const elsewhere = join(dataDir, 'elsewhere');
      mkdirSync(elsewhere);
      symlinkSync(join(models, 'sub'), join(elsewhere, 'deep'));
      symlinkSync(join(models, 'real.gguf'), join(elsewhere, 'alias.gguf'));
      const slash = await runCli(['models', 'add', `${join(models, 'real.gguf')}/`, '--data-dir', dataDir]);
      assert.equal(slash.code, 1, slash.stdout);
      assert.match(slash.stderr, /no file at .*real\.gguf\/ \(400 invalid_request\)$/m);
      const dotted = await runCli(['models', 'add', 'deep/../real.gguf', '--id', 'dotted', '--json', '--data-dir', dataDir], { cwd: elsewhere });
      assert.equal(dotted.code, 0, dotted.stderr);
      assert.equal((JSON.parse(dotted.stdout) as ModelObject & { path: string }).path, realpathSync(join(models, 'real.gguf')));
      const aliased = await runCli(['models', 'add', join(elsewhere, 'alias.gguf'), '--json', '--data-dir', dataDir]);
      assert.equal(aliased.code, 0, aliased.stderr);
      assert.equal((JSON.parse(aliased.stdout) as ModelObject).id, 'alias', 'named by the link given, not the file it leads to');
    }));

  test('lmsp-tiny removed offline is not registered again by the next command', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      assert.equal((await runCli(['pair', '--data-dir', dataDir])).code, 0);
      const removed = await runCli(['models', 'rm', 'lmsp-tiny', '--data-dir', dataDir]);
      assert.equal(removed.code, 0, removed.stderr);
      assert.deepEqual(await listed(dataDir), []);
    }));
});
