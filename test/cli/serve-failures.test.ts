/**
 * `lmsp serve` and the commands that create a data directory, when they cannot do what they were
 * told: each failure is one message on stderr that says what to change, the document of `--json`
 * and a documented exit code (LMSP 12), never a stack trace, and a flag that does not parse
 * creates nothing on disk.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { runCli, startCli, type CliResult } from '../helpers/cli.js';
import { withDataDir, writeCorruptDatabase } from '../helpers/data-dir.js';
import { waitFor, withService } from '../helpers/service.js';

function failureOf(result: CliResult): { code: string; message: string } {
  // With --json, serve writes its log on stderr: stdout is the one document.
  return (JSON.parse(result.stdout) as { error: { code: string; message: string } }).error;
}

function assertNoStackTrace(result: CliResult): void {
  assert.doesNotMatch(result.stderr, /\n\s+at /, result.stderr);
}

describe('lmsp serve when it cannot start (LMSP 12)', () => {
  test('a port already in use: exit 1 and a message naming --port, on stderr and as the --json document', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      const holder = createServer();
      await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
      const { port } = holder.address() as AddressInfo;
      try {
        const plain = await runCli(['serve', '--port', String(port), '--log-format', 'json', '--data-dir', dataDir]);
        assert.equal(plain.code, 1, plain.stderr);
        assert.match(plain.stderr, new RegExp(`^lmsp: the address 127\\.0\\.0\\.1:${port} is already in use; pick another with --port`, 'm'));
        const json = await runCli(['serve', '--port', String(port), '--json', '--log-format', 'json', '--data-dir', dataDir]);
        assert.equal(json.code, 1, json.stderr);
        assert.match(failureOf(json).message, /already in use/);
        // Closed as a stop closes it: the database's log written into it, the lock let go.
        assert.deepEqual(readdirSync(dataDir).filter((name) => /-wal$|-shm$|-journal$/.test(name)), [], 'no log or journal left beside the database');
      } finally {
        holder.close();
      }
    }));

  test('a database another program holds locked: a command that must write it exits 74 database_unavailable with what SQLite said', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      assert.equal((await runCli(['pair', '--data-dir', dataDir])).code, 0);
      const holder = new BetterSqlite3(join(dataDir, 'lmsp.db'));
      holder.exec('BEGIN IMMEDIATE');
      try {
        const result = await runCli(['pair', '--json', '--data-dir', dataDir]);
        assert.equal(result.code, 74, result.stderr);
        assert.equal(failureOf(result).code, 'database_unavailable');
        assert.match(failureOf(result).message, /^cannot write the database: database is locked \(a full disk, a read-only file or file system, or another program holding it locked\)$/);
        assertNoStackTrace(result);
      } finally {
        holder.exec('ROLLBACK');
        holder.close();
      }
    }));

  test('a disk so full that the data directory cannot be used: exit 74 saying the disk is full, not asking for permissions', { timeout: 60_000 }, (t) =>
    withDataDir(async (parent) => {
      const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', parent]);
      if (mount.status !== 0) return t.skip('mounting a small file system needs root');
      try {
        // One data directory made before the disk filled up, one made after.
        assert.equal((await runCli(['pair', '--data-dir', join(parent, 'before')])).code, 0);
        try {
          writeFileSync(join(parent, 'filler'), Buffer.alloc(8 << 20));
        } catch (error) {
          assert.equal((error as NodeJS.ErrnoException).code, 'ENOSPC');
        }
        for (const args of [['serve', '--port', '0', '--data-dir', join(parent, 'before')], ['pair', '--data-dir', join(parent, 'before')], ['pair', '--data-dir', join(parent, 'after')]]) {
          const result = await runCli([...args, '--json']);
          assert.equal(result.code, 74, `${args.join(' ')}: ${result.stderr}`);
          assert.equal(failureOf(result).code, 'database_unavailable');
          assert.match(failureOf(result).message, /^cannot use .*: the disk is full \(.*\); free some space on it/, args.join(' '));
          assertNoStackTrace(result);
        }
        // Room for a few pages: the database is begun, then a write of the start fails.
        const filler = join(parent, 'filler');
        truncateSync(filler, statSync(filler).size - 80 * 1024);
        const almost = await runCli(['pair', '--json', '--data-dir', join(parent, 'almost')]);
        assert.equal(almost.code, 74, almost.stderr);
        assert.match(failureOf(almost).message, /^cannot use .*: the disk is full \(database or disk is full\); free some space on it/);
      } finally {
        spawnSync('umount', [parent]);
      }
    }));

  test('a --host that is no address of this machine: exit 1 and a message, not a stack trace', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      // 192.0.2.0/24 is reserved for documentation: no machine has it.
      const result = await runCli(['serve', '--host', '192.0.2.1', '--port', '0', '--log-format', 'json', '--data-dir', dataDir]);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /^lmsp: cannot listen on 192\.0\.2\.1:0 \(EADDRNOTAVAIL\): --host must be an address of this machine/m);
      assertNoStackTrace(result);
      assert.deepEqual(readdirSync(dataDir), [], 'found before anything was written');
      assert.doesNotMatch(result.stdout + result.stderr, /listening beyond loopback/, 'no warning about a port it never listened on');
    }));

  test('a data directory that cannot be created: exit 74 database_unavailable naming --data-dir, for serve, pair and pull', { timeout: 60_000 }, () =>
    withDataDir(async (parent) => {
      const file = join(parent, 'a-file');
      writeFileSync(file, 'not a folder');
      const dataDir = join(file, 'lmsp');
      for (const args of [['serve', '--port', '0'], ['pair'], ['models', 'pull', 'https://127.0.0.1:1/x.gguf'], ['config', 'set', 'port', '6000']]) {
        const result = await runCli([...args, '--json', '--data-dir', dataDir]);
        assert.equal(result.code, 74, `${args.join(' ')}: ${result.stderr}`);
        assert.match(result.stderr, /^lmsp: cannot use the data directory .*ENOTDIR.*choose another with --data-dir/m, args.join(' '));
        assert.equal(failureOf(result).code, 'database_unavailable', args.join(' '));
        assertNoStackTrace(result);
      }
    }));

  test('a data directory other users can write, or another user owns: exit 74 for every command, nothing written in it, no link followed', { timeout: 90_000 }, () =>
    withDataDir(async (parent) => {
      const dataDir = join(parent, 'shared');
      mkdirSync(dataDir);
      chmodSync(dataDir, 0o777);
      // What a neighbour who made the folder could have planted: a link where lmsp writes its service file.
      const victim = join(parent, 'victim.txt');
      writeFileSync(victim, 'untouched');
      symlinkSync(victim, join(dataDir, 'service.json.tmp'));
      const commands = [['serve', '--port', '0'], ['pair'], ['tasks', 'ls'], ['models', 'ls'], ['doctor']];
      for (const args of commands) {
        const result = await runCli([...args, '--json', '--data-dir', dataDir]);
        assert.equal(result.code, 74, `${args.join(' ')}: ${result.stderr}`);
        assert.match(result.stderr, /^lmsp: cannot use the data directory .*: other users can write in it \(mode 777\).*chmod 700/m, args.join(' '));
        assert.equal(failureOf(result).code, 'database_unavailable', args.join(' '));
        assertNoStackTrace(result);
      }
      assert.deepEqual(readdirSync(dataDir), ['service.json.tmp'], 'nothing was created in it');
      assert.equal(readFileSync(victim, 'utf8'), 'untouched');
      // Writable by its group: used when that group is this user's own primary one (a private
      // group, as a 002 umask makes), refused when it is another.
      chmodSync(dataDir, 0o770);
      const ownGroup = await runCli(['pair', '--json', '--data-dir', dataDir]);
      assert.equal(ownGroup.code, 0, ownGroup.stderr);
      if (process.getuid?.() === 0) {
        chownSync(dataDir, 0, 65534);
        const otherGroup = await runCli(['pair', '--json', '--data-dir', dataDir]);
        assert.equal(otherGroup.code, 74, otherGroup.stderr);
        assert.match(otherGroup.stderr, /other users can write in it \(mode 770\)/);
        chownSync(dataDir, 0, 0);
      }
      if (process.getuid?.() === 0) {
        // Owned by another user (nobody), even with a private mode.
        chmodSync(dataDir, 0o700);
        chownSync(dataDir, 65534, 65534);
        const result = await runCli(['serve', '--port', '0', '--json', '--data-dir', dataDir]);
        assert.equal(result.code, 74, result.stderr);
        assert.match(result.stderr, /it belongs to another user \(uid 65534\)/);
        assert.equal(readFileSync(victim, 'utf8'), 'untouched');
        chownSync(dataDir, 0, 0);
      }
      // Made private, it is used; a link left where the service writes a file of its own is
      // replaced, never written through.
      chmodSync(dataDir, 0o700);
      const serving = startCli(['serve', '--port', '0', '--json', '--data-dir', dataDir]);
      try {
        await waitFor(() => serving.stdout().includes('"url"') || undefined, { what: `the service to start: ${serving.stderr()}` });
      } finally {
        serving.child.kill('SIGTERM');
      }
      assert.equal(await serving.closed, 0, serving.stderr());
      assert.equal(readFileSync(victim, 'utf8'), 'untouched');
      assert.throws(() => lstatSync(join(dataDir, 'service.json.tmp')), /ENOENT/, 'the planted link is gone');
    }));

  test('a database that is corrupt, not lmsp\'s, or a folder: every command exits 65 and the file stays as it was', { timeout: 180_000 }, () =>
    withDataDir(async (parent) => {
      const commands = [['serve', '--port', '0'], ['pair'], ['gc', '--dry-run'], ['gc'], ['models', 'ls'], ['clients', 'ls'], ['config', 'ls']];
      const corrupt = join(parent, 'corrupt');
      writeCorruptDatabase(corrupt);
      const foreign = join(parent, 'foreign');
      mkdirSync(foreign);
      const other = new BetterSqlite3(join(foreign, 'lmsp.db'));
      other.exec('CREATE TABLE accounts (id INTEGER)');
      other.close();
      const folder = join(parent, 'folder');
      mkdirSync(join(folder, 'lmsp.db'), { recursive: true });
      for (const [dataDir, why] of [[corrupt, /is corrupt/], [foreign, /not one of lmsp's/], [folder, /is not a file/]] as const) {
        const file = join(dataDir, 'lmsp.db');
        const before = statSync(file).isFile() ? readFileSync(file) : null;
        for (const args of commands) {
          const result = await runCli([...args, '--json', '--data-dir', dataDir]);
          const what = `${args.join(' ')} on ${dataDir}`;
          assert.equal(result.code, 65, `${what}: ${result.stderr}`);
          assert.match(result.stderr, why, what);
          assert.equal(failureOf(result).code, 'database_not_usable', what);
          assertNoStackTrace(result);
          if (before) assert.deepEqual(readFileSync(file), before, `${what} left the file as it was`);
        }
      }
    }));

  test('a flag that does not parse is a usage error that leaves nothing on disk', { timeout: 60_000 }, () =>
    withDataDir(async (parent) => {
      const dataDir = join(parent, 'lmsp');
      const cases: Array<[string[], RegExp]> = [
        [['--port', 'abc'], /--port: expected an integer/],
        [['--host', '999.1.1.1'], /--host: expected an IP address or a host name, got '999\.1\.1\.1'/],
        [['--host', 'bad host!!'], /--host: expected an IP address or a host name/],
        [['--host', '0x7f.1'], /--host: expected an IP address or a host name/],
        [['--name', ' '], /--name: expected a name/],
        [['--max-connections', 'AUTO'], /--max-connections: expected auto or an integer from 1 to 1000000/],
        [['--threads', '0'], /--threads: expected auto or an integer from 1 to 1024/],
      ];
      for (const [flags, message] of cases) {
        const result = await runCli(['serve', ...flags, '--data-dir', dataDir]);
        assert.equal(result.code, 2, result.stderr);
        assert.match(result.stderr, message);
        assert.ok(!existsSync(dataDir), `${flags.join(' ')}: no data directory was created`);
      }
    }));

  test('a data directory another lmsp process holds: exit 74 naming what holds it', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const second = await runCli(['serve', '--port', '0', '--json', '--data-dir', service.dataDir]);
      assert.equal(second.code, 74, second.stderr);
      assert.match(second.stderr, /^lmsp: another lmsp process holds the data directory .* \(a service, or a command such as lmsp models pull run without one\)/m);
      assert.equal(failureOf(second).code, 'database_unavailable');
      assertNoStackTrace(second);
      assert.equal((await fetch(`${service.url}/healthz`)).status, 200, 'the first service goes on');
    }));

  test('lmsp models pull with a --digest that does not parse is a usage error, before any download', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      const result = await runCli(['models', 'pull', 'https://127.0.0.1:1/x.gguf', '--digest', 'sha256:nothex', '--json', '--data-dir', dataDir]);
      assert.equal(result.code, 2, result.stderr);
      assert.equal(failureOf(result).code, 'invalid_usage');
      assert.match(result.stderr, /--digest: digest must be 'sha256:' followed by 64 hexadecimal digits/);
    }));
});
