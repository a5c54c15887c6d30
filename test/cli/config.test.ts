import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { OPTIONS, resolveConfig } from '../../src/config.js';
import { timerDelay } from '../../src/time.js';
import { runCli } from '../helpers/cli.js';
import { withDataDir } from '../helpers/data-dir.js';
import { withService } from '../helpers/service.js';

describe('configuration precedence: flag > LMSP_* > stored > default (LMSP section 2)', () => {
  test('resolveConfig applies the precedence and parses durations', () => {
    const base = { dataDirFlag: '/tmp/x' };
    assert.equal(resolveConfig({ ...base, env: {} }).retentionMs, 7 * 24 * 3600 * 1000);
    assert.equal(resolveConfig({ ...base, env: {}, stored: { retentionMs: '2d' } }).retentionMs, 2 * 24 * 3600 * 1000);
    assert.equal(resolveConfig({ ...base, env: { LMSP_RETENTION: '12h' }, stored: { retentionMs: '2d' } }).retentionMs, 12 * 3600 * 1000);
    assert.equal(resolveConfig({ ...base, env: { LMSP_RETENTION: '12h' }, stored: { retentionMs: '2d' }, flags: { retentionMs: '30s' } }).retentionMs, 30_000);
    assert.equal(resolveConfig({ ...base, env: {}, flags: { retentionMs: 'forever' } }).retentionMs, Infinity);
    assert.equal(resolveConfig({ ...base, env: {}, flags: { sweepIntervalMs: '500ms' } }).sweepIntervalMs, 500);
    // A period of 0 runs without pause. Long ones are taken (their timers wait at most about 24.8 days).
    assert.throws(() => resolveConfig({ ...base, env: {}, flags: { sweepIntervalMs: '0s' } }), /--sweep-interval.*at least 100ms/);
    assert.equal(resolveConfig({ ...base, env: { LMSP_SWEEP_INTERVAL: '30d' } }).sweepIntervalMs, 30 * 24 * 3600 * 1000);
    assert.equal(resolveConfig({ ...base, env: {}, stored: { keepAliveMs: '30d' } }).keepAliveMs, 30 * 24 * 3600 * 1000);
    assert.equal(resolveConfig({ ...base, env: {}, flags: { keepAliveMs: 'forever' } }).keepAliveMs, Infinity);
    assert.equal(resolveConfig({ ...base, env: {}, flags: { keepAliveMs: '0s' } }).keepAliveMs, 0);
    // A bare 0 is no time in any unit, as `--keep-alive 0` is usually written (Ollama's keep_alive: 0).
    assert.equal(resolveConfig({ ...base, env: {}, flags: { keepAliveMs: '0' } }).keepAliveMs, 0);
    assert.throws(() => resolveConfig({ ...base, env: {}, flags: { keepAliveMs: '5' } }), /expected a duration/);
    // What a timer can hold: a longer delay would fire after 1 ms (a keep-alive of 30d unloaded the model at once).
    assert.equal(timerDelay(30 * 24 * 3600 * 1000), 2 ** 31 - 1);
    assert.equal(timerDelay(5 * 60_000), 5 * 60_000);
    assert.throws(() => resolveConfig({ ...base, env: {}, flags: { retentionMs: 'soon' } }), /--retention/);
    assert.throws(() => resolveConfig({ ...base, env: { LMSP_PARALLEL: 'many' } }), /LMSP_PARALLEL/);
    assert.equal(resolveConfig({ ...base, env: {} }).host, '127.0.0.1');
    assert.equal(resolveConfig({ ...base, env: {} }).port, 5677);
    assert.equal(resolveConfig({ env: { LMSP_DATA_DIR: '/srv/lmsp' } }).dataDir, '/srv/lmsp');
    assert.equal(resolveConfig({ env: { XDG_DATA_HOME: '/home/u/.data' } }).dataDir, '/home/u/.data/lmsp');
    assert.equal(resolveConfig({ env: { XDG_DATA_HOME: 'relative/data' } }).dataDir, join(homedir(), '.local', 'share', 'lmsp'),
      'a relative XDG_DATA_HOME is ignored (XDG Base Directory specification)');
    assert.equal(resolveConfig({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '25' } }).debug.tokenDelayMs, 25);
  });

  test('sizes are at least a byte; origins take their default port written out, as browsers send them without it', () => {
    const base = { dataDirFlag: '/tmp/x', env: {} };
    assert.equal(resolveConfig({ ...base, flags: { bodyLimitBytes: '2MiB' } }).bodyLimitBytes, 2 * 1024 * 1024);
    for (const size of ['0', '0.4', '0KiB']) {
      assert.throws(() => resolveConfig({ ...base, flags: { bodyLimitBytes: size } }), /--body-limit: expected a size of at least 1 byte/, size);
    }
    assert.deepEqual(resolveConfig({ ...base, flags: { allowedOrigins: 'http://app.example:80,https://b.example:443,http://c.example:3000/' } }).allowedOrigins,
      ['http://app.example', 'https://b.example', 'http://c.example:3000']);
    for (const origin of ['http://app.example/path', 'ftp://app.example', 'http://user@app.example', 'http://app.example?x=1']) {
      assert.throws(() => resolveConfig({ ...base, flags: { allowedOrigins: origin } }), /--allowed-origins: expected origins like/, origin);
    }
    assert.throws(() => resolveConfig({ ...base, flags: { allowedOrigins: 'http://ok.example,nope' } }), /\('nope' is not\)/);
    // Hosts alike: the value is named once, an item only when the list has several.
    assert.throws(() => resolveConfig({ ...base, flags: { allowedHosts: 'h.example:8080' } }), (error: Error) => error.message === "--allowed-hosts: expected host names without ports, got 'h.example:8080'");
    assert.throws(() => resolveConfig({ ...base, flags: { allowedHosts: 'a.example,h.example:1' } }), /without ports \('h.example:1' is not\), got/);
  });

  test('a stored setting applies at the next start, and a flag overrides it', { timeout: 60_000 }, () => withDataDir(async (dataDir) => {
    await withService({ dataDir }, async (service) => {
      await service.stop();
      const set = await runCli(['config', 'set', 'name', 'stored-name', '--data-dir', dataDir]);
      assert.equal(set.code, 0, set.stderr);
      const bad = await runCli(['config', 'set', 'retention', 'soon', '--data-dir', dataDir]);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /retention/);
      let restarted = await service.restart();
      assert.equal((await restarted.client.service()).name, 'stored-name');
      await restarted.stop();
      restarted = await service.restart({ args: ['--name', 'flag-name'] });
      assert.equal((await restarted.client.service()).name, 'flag-name');
      await restarted.stop();
      restarted = await service.restart({ env: { LMSP_NAME: 'env-name' } });
      assert.equal((await restarted.client.service()).name, 'env-name');
    });
  }));

  test('while a service runs, config ls and get also show what it runs with, flags included', { timeout: 60_000 }, () =>
    withService({ args: ['--parallel', '2', '--name', 'flagged'] }, async (service) => {
      const port = Number(new URL(service.url).port);
      const get = await runCli(['config', 'get', 'parallel', '--data-dir', service.dataDir]);
      assert.equal(get.code, 0, get.stderr);
      assert.equal(get.stdout, '1 (default); the running service uses 2\n');
      const ls = await runCli(['config', 'ls', '--json', '--data-dir', service.dataDir]);
      const rows = JSON.parse(ls.stdout) as Array<{ setting: string; value: unknown; source: string; running: unknown }>;
      const row = (setting: string) => rows.find((candidate) => candidate.setting === setting);
      assert.deepEqual(row('port'), { setting: 'port', value: 5677, source: 'default', running: port });
      assert.deepEqual(row('name')?.running, 'flagged');
      assert.ok(rows.every((candidate) => candidate.running !== undefined), 'every setting has its running value');
      const table = await runCli(['config', 'ls', '--data-dir', service.dataDir]);
      assert.match(table.stdout, /^SETTING\s+VALUE\s+SOURCE\s+RUNNING\n/);
      await service.stop();
      const stopped = await runCli(['config', 'get', 'parallel', '--json', '--data-dir', service.dataDir]);
      assert.deepEqual(JSON.parse(stopped.stdout), { setting: 'parallel', value: 1, source: 'default' });
    }));

  test('before the first start, config ls shows the defaults and config get stores nothing, creating nothing', { timeout: 30_000 }, () => withDataDir(async (parent) => {
    const dataDir = join(parent, 'never-started');
    const listed = await runCli(['config', 'ls', '--json', '--data-dir', dataDir], { env: { LMSP_NAME: 'from-env' } });
    assert.equal(listed.code, 0, listed.stderr);
    const rows = JSON.parse(listed.stdout) as Array<{ setting: string; value: unknown; source: string }>;
    assert.deepEqual(rows.find((row) => row.setting === 'port'), { setting: 'port', value: 5677, source: 'default' });
    assert.deepEqual(rows.find((row) => row.setting === 'name'), { setting: 'name', value: 'from-env', source: 'LMSP_NAME' });
    // Each default reads as `lmsp serve --help` writes it (24h, 1MiB), not as 1d or 1048576;
    // threads alone shows what auto resolved to on this machine.
    for (const option of OPTIONS.filter((o) => !o.defaultText.includes('<') && o.defaultText !== '(none)' && o.flag !== '--threads')) {
      const row = rows.find((r) => r.setting === option.flag.slice(2));
      assert.equal(String(row?.value), option.defaultText, option.flag);
    }
    const got = await runCli(['config', 'get', 'port', '--data-dir', dataDir]);
    assert.equal(got.code, 0, got.stderr);
    assert.equal(got.stdout.trim(), '5677 (default)');
    // get is a row of ls, value typed alike; set answers the row it makes.
    const gotJson = await runCli(['config', 'get', 'port', '--json', '--data-dir', dataDir]);
    assert.deepEqual(JSON.parse(gotJson.stdout), { setting: 'port', value: 5677, source: 'default' });
    assert.ok(!existsSync(dataDir), 'reading settings made no data directory');
    const set = await runCli(['config', 'set', 'port', '6000', '--json', '--data-dir', dataDir]);
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(JSON.parse(set.stdout), { setting: 'port', value: 6000, source: 'stored' });
    const stored = await runCli(['config', 'get', 'port', '--json', '--data-dir', dataDir]);
    assert.deepEqual(JSON.parse(stored.stdout), { setting: 'port', value: 6000, source: 'stored' });
  }));

  test('a relative models-dir is stored as the folder it names where config set runs, as it reports', { timeout: 30_000 }, () => withDataDir(async (parent) => {
    const dataDir = join(parent, 'data');
    const here = join(parent, 'here');
    mkdirSync(here);
    const set = await runCli(['config', 'set', 'models-dir', './models', '--json', '--data-dir', dataDir], { cwd: here });
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(JSON.parse(set.stdout), { setting: 'models-dir', value: join(here, 'models'), source: 'stored' });
    // Read from anywhere else, it is the same folder: the one a service started anywhere uses.
    const got = await runCli(['config', 'get', 'models-dir', '--json', '--data-dir', dataDir], { cwd: parent });
    assert.deepEqual(JSON.parse(got.stdout), { setting: 'models-dir', value: join(here, 'models'), source: 'stored' });
  }));

  test('bad flags exit with a clear message and status 2', { timeout: 30_000 }, () => withDataDir(async (dataDir) => {
    const result = await runCli(['serve', '--data-dir', dataDir, '--retention', 'sometimes']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /--retention: expected a duration/);
    // Checked before anything is opened: a body limit of 0 is a usage error, not Fastify's stack trace.
    const zero = await runCli(['serve', '--data-dir', dataDir, '--body-limit', '0', '--json']);
    assert.equal(zero.code, 2, zero.stderr);
    assert.equal((JSON.parse(zero.stdout) as { error: { code: string } }).error.code, 'invalid_usage');
  }));
});
