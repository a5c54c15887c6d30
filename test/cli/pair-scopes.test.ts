import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { withDataDir } from '../helpers/data-dir.js';
import { withService } from '../helpers/service.js';

/** The address and the body of the curl command that `lmsp pair` prints for the client to run. */
function printedPairCommand(stdout: string): { url: string; body: { code: string; client_name: string } } {
  const match = /^ {2}curl -s (\S+)\/v1\/pair -H 'content-type: application\/json' -d '((?:[^']|'\\'')*)'$/m.exec(stdout);
  assert.ok(match, stdout);
  return { url: match[1]!, body: JSON.parse(match[2]!.replace(/'\\''/g, "'")) as { code: string; client_name: string } };
}

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

  test('--name is refused when /v1/pair would refuse it as client_name: empty, over 200 characters, or with control characters', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      for (const name of ['', 'n'.repeat(201)]) {
        const refused = await runCli(['pair', '--name', name, '--data-dir', dataDir]);
        assert.equal(refused.code, 2, `${name.length} characters: ${refused.stdout}`);
        assert.match(refused.stderr, /--name: a client's name is 1 to 200 characters/);
      }
      for (const name of ['a\u001b[31mb', 'tab\there', 'c1\u0085']) {
        const refused = await runCli(['pair', '--name', name, '--json', '--data-dir', dataDir]);
        assert.equal(refused.code, 2, `${JSON.stringify(name)}: ${refused.stdout}`);
        assert.match(refused.stderr, /--name: a client's name holds no control characters/);
      }
      const longest = await runCli(['pair', '--name', 'n'.repeat(200), '--data-dir', dataDir]);
      assert.equal(longest.code, 0, longest.stderr);
      assert.equal(printedPairCommand(longest.stdout).body.client_name, 'n'.repeat(200));
      // --json names the code too, as the API's answer does.
      const json = await runCli(['pair', '--name', 'phone', '--json', '--data-dir', dataDir]);
      assert.equal(json.code, 0, json.stderr);
      assert.deepEqual(Object.keys(JSON.parse(json.stdout) as object), ['object', 'code', 'name', 'scopes', 'expires_at']);
      assert.equal((JSON.parse(json.stdout) as { name: string }).name, 'phone');
    }));

  test('the printed curl command pairs a client named by --name, at the address the service has', { timeout: 60_000 }, async () => {
    await withDataDir(async (dataDir) => {
      assert.equal((await runCli(['config', 'set', 'port', '6123', '--data-dir', dataDir])).code, 0);
      const paired = await runCli(['pair', '--name', "Bob's laptop", '--data-dir', dataDir]);
      assert.equal(paired.code, 0, paired.stderr);
      const printed = printedPairCommand(paired.stdout);
      assert.equal(printed.url, 'http://127.0.0.1:6123', 'a stopped service will listen where its settings say');
      assert.equal(printed.body.client_name, "Bob's laptop");
    });
    await withService({}, async (service) => {
      const paired = await runCli(['pair', '--name', 'scraper', '--data-dir', service.dataDir]);
      assert.equal(paired.code, 0, paired.stderr);
      const printed = printedPairCommand(paired.stdout);
      assert.equal(printed.url, service.url);
      const answer = await fetch(`${printed.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(printed.body) });
      assert.equal(answer.status, 201);
      assert.equal(((await answer.json()) as { name: string }).name, 'scraper');
    });
  });
});
