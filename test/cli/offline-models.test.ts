/**
 * The model commands without a running service (LMSP 5, 12): a data directory that only `lmsp
 * pair` has made lists the built-in model as a first `lmsp serve` would register it, and one the
 * operator removed stays removed.
 */
import assert from 'node:assert/strict';
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

  test('lmsp-tiny removed offline is not registered again by the next command', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      assert.equal((await runCli(['pair', '--data-dir', dataDir])).code, 0);
      const removed = await runCli(['models', 'rm', 'lmsp-tiny', '--data-dir', dataDir]);
      assert.equal(removed.code, 0, removed.stderr);
      assert.deepEqual(await listed(dataDir), []);
    }));
});
