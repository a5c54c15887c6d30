import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { withDataDir } from '../helpers/data-dir.js';

async function pairScopes(dataDir: string, args: string[]): Promise<string[]> {
  const paired = await runCli(['pair', ...args, '--json', '--data-dir', dataDir]);
  assert.equal(paired.code, 0, paired.stderr);
  return (JSON.parse(paired.stdout) as { scopes: string[] }).scopes;
}

describe('lmsp pair --scopes (LMSP sections 4 and 12)', () => {
  test('scopes given as a comma-separated list, as several words, or with --scopes repeated are all granted', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      assert.deepEqual(await pairScopes(dataDir, ['--scopes', 'responses,models:read']), ['responses', 'models:read']);
      assert.deepEqual(await pairScopes(dataDir, ['--scopes', 'responses', 'metrics']), ['responses', 'metrics']);
      assert.deepEqual(await pairScopes(dataDir, ['--scopes', 'responses', '--scopes', 'metrics', '--name', 'scraper']), ['responses', 'metrics']);
      assert.deepEqual(await pairScopes(dataDir, ['--scopes', 'admin', '--scopes', 'admin']), ['admin']);
      const unknown = await runCli(['pair', '--scopes', 'responses', 'bogus', '--data-dir', dataDir]);
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /unknown scope bogus/);
    }));

  test('--ttl takes the durations of LMSP 12; under a second or over a week is refused as out of range, not as malformed', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      const short = await runCli(['pair', '--ttl', '500ms', '--data-dir', dataDir]);
      assert.equal(short.code, 2);
      assert.match(short.stderr, /at least 1s/);
      // The API's bound (ttl_seconds at most a week) holds without the service too.
      const long = await runCli(['pair', '--ttl', '8d', '--data-dir', dataDir]);
      assert.equal(long.code, 2, long.stderr);
      assert.match(long.stderr, /at most 7d/);
      assert.equal((await runCli(['pair', '--ttl', '7d', '--data-dir', dataDir])).code, 0);
      const paired = await runCli(['pair', '--ttl', '1500ms', '--json', '--data-dir', dataDir]);
      assert.equal(paired.code, 0, paired.stderr);
      const expiresAt = (JSON.parse(paired.stdout) as { expires_at: number }).expires_at;
      assert.ok(expiresAt - Date.now() / 1000 <= 3, 'expires within seconds');
    }));
});
