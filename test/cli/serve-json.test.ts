/**
 * `lmsp serve --json` (LMSP 12): standard output is one JSON document, the service's address and
 * identity once it listens, so a script can read it; the log goes to standard error instead.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { allowedCpus } from '../../src/engine/cpu-affinity.js';
import { loadMigrations } from '../../src/store/db.js';
import { LMSP_BIN, waitFor } from '../helpers/service.js';
import { withDataDir } from '../helpers/data-dir.js';

describe('lmsp serve --json (LMSP 12)', () => {
  test('standard output is one JSON document, the service info; the log is on standard error', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      const child = spawn(process.execPath, [LMSP_BIN, 'serve', '--json', '--port', '0', '--log-format', 'json', '--data-dir', dataDir], {
        env: { ...process.env, LMSP_LOG_LEVEL: 'info' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        const url = await waitFor(() => /"url": "(http:[^"]+)"/.exec(stdout)?.[1], { what: `the service info on stdout:\n${stdout}\n${stderr}` });
        // A generation, so that tasks, the model load and the runner write their log lines too.
        const token = readFileSync(join(dataDir, 'operator.token'), 'utf8').trim();
        const created = await fetch(`${url}/v1/responses`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'lmsp-tiny', input: 'hi', max_output_tokens: 5 }),
        });
        assert.equal(created.status, 200);
      } finally {
        child.kill('SIGTERM');
      }
      assert.equal(await exited, 0, stderr);
      const info = JSON.parse(stdout) as { url: string; pid: number; id: string };
      assert.equal(info.pid, child.pid);
      assert.match(info.id, /^svc_/);
      assert.match(stderr, /"msg":"lmsp [^"]* listening on /, 'the log is written on standard error');
      assert.match(stderr, /"msg":"task completed"/);
    }));

  test('a start that upgrades the database says from which schema to which', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      // A database an lmsp of the first schema left.
      const migrations = loadMigrations();
      const old = new BetterSqlite3(join(dataDir, 'lmsp.db'));
      old.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
      old.exec(migrations[0]!.sql);
      old.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(migrations[0]!.version, migrations[0]!.name);
      old.close();
      const start = () => new Promise<string>((resolve, reject) => {
        const child = spawn(process.execPath, [LMSP_BIN, 'serve', '--json', '--port', '0', '--log-format', 'json', '--data-dir', dataDir], {
          env: { ...process.env, LMSP_LOG_LEVEL: 'info' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        child.stdout.once('data', () => child.kill('SIGTERM'));
        // Stopped as soon as it says where it listens, by its own handler.
        child.once('exit', (code, signal) => (code === 0 ? resolve(stderr) : reject(new Error(`exit ${code} (${signal}): ${stderr}`))));
      });
      const latest = migrations.at(-1)!.version;
      assert.match(await start(), new RegExp(`"from":1,"to":${latest},.*"msg":"database upgraded from schema 1 to ${latest}"`));
      assert.doesNotMatch(await start(), /database upgraded/, 'the next start has nothing to upgrade');
    }));

  // A start made slow by its probe of taskset (seconds, on a loaded machine): a taskset on PATH
  // that sleeps before it runs the command it is given. Pinning needs two CPUs.
  const cpus = allowedCpus()?.length ?? 0;
  test('a stop asked for while the service starts ends it at once, with the exit status of the signal and a word in the log', {
    timeout: 60_000, skip: process.platform !== 'linux' || cpus < 2 ? 'pinning runners needs Linux and two CPUs' : false,
  }, () =>
    withDataDir(async (dataDir) => {
      const bin = join(dataDir, 'slow-bin');
      mkdirSync(bin);
      writeFileSync(join(bin, 'taskset'), '#!/bin/sh\nsleep 20\nshift 2\nexec "$@"\n', { mode: 0o755 });
      const child = spawn(process.execPath, [LMSP_BIN, 'serve', '--json', '--port', '0', '--threads', '1', '--log-format', 'json', '--data-dir', join(dataDir, 'data')], {
        env: { ...process.env, LMSP_LOG_LEVEL: 'info', PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('exit', (code, signal) => resolve([code, signal])));
      // The probe comes right after this line.
      child.stderr.on('data', (chunk: Buffer) => {
        const before = stderr;
        stderr += chunk.toString();
        if (!before.includes('parallel slots run as') && stderr.includes('parallel slots run as')) setTimeout(() => child.kill('SIGTERM'), 500);
      });
      const started = Date.now();
      const [code, signal] = await exited;
      // Its own handler answered (a process killed by the signal has no exit code), during the probe.
      assert.deepEqual([code, signal], [143, null], stderr);
      assert.ok(Date.now() - started < 15_000, 'it did not wait for the probe');
      assert.match(stderr, /"signal":"SIGTERM".*"msg":"stopping before the start finished/);
      assert.equal(stdout, '', 'it never said it listens');
    }));
});
