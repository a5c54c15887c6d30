/**
 * LMSP 12: every command takes `--json` and then prints one JSON document on stdout, a failure
 * included, so that a script reading stdout always has something to parse; usage errors exit 2,
 * whoever finds them (commander or the command itself).
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runCli, type CliResult } from '../helpers/cli.js';
import { withDataDir } from '../helpers/data-dir.js';
import { api, waitFor, withService } from '../helpers/service.js';

interface Failure {
  error: { code: string; message: string; status?: number; param?: string | null };
}

function failureOf(result: CliResult): Failure['error'] {
  const document = JSON.parse(result.stdout) as Failure;
  assert.deepEqual(Object.keys(document), ['error'], result.stdout);
  assert.equal(typeof document.error.message, 'string');
  return document.error;
}

describe('lmsp --json when the command fails (LMSP 12)', () => {
  test('an error of the service is the document, in the API\'s error shape; the exit code stays 1', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const missing = await runCli(['tasks', 'show', 'task_nope', '--json', '--data-dir', service.dataDir]);
      assert.equal(missing.code, 1);
      assert.deepEqual(failureOf(missing), { status: 404, code: 'not_found', message: "No task with id 'task_nope'.", param: 'id' });
      assert.match(missing.stderr, /404 not_found/, 'people still read the message on stderr');

      const plain = await runCli(['tasks', 'show', 'task_nope', '--data-dir', service.dataDir]);
      assert.equal(plain.code, 1);
      assert.equal(plain.stdout, '', 'without --json nothing goes to stdout');
    }));

  test('usage errors exit 2 with code invalid_usage: commander\'s and the command\'s own', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      for (const args of [
        ['tasks', 'show'], // a missing argument
        ['tasks', 'ls', '--bogus'], // an unknown option
        ['bogus'], // an unknown command
        ['tasks', 'ls', '--limit', 'abc'], // a number that is not one
        ['tasks', 'ls', '--status', 'runing'], // a status that does not exist
        ['tasks', 'events', 'task_x', '--after', '-1'],
        ['pair', '--scopes', 'nope'],
      ]) {
        const result = await runCli([...args, '--json', '--data-dir', dataDir]);
        assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
        assert.equal(failureOf(result).code, 'invalid_usage', args.join(' '));
      }
      // A group without its subcommand is a usage error too, with the options every command
      // takes accepted: what is missing is the command, not --data-dir.
      for (const name of ['tasks', 'models', 'clients', 'config']) {
        const group = await runCli([name, '--data-dir', dataDir]);
        assert.equal(group.code, 2, name);
        assert.doesNotMatch(group.stderr, /unknown option/, name);
        assert.match(group.stderr, new RegExp(`Usage: lmsp ${name}`), name);
        const json = await runCli([name, '--json', '--data-dir', dataDir]);
        assert.equal(json.code, 2, name);
        assert.deepEqual(failureOf(json), { code: 'invalid_usage', message: 'a command is needed here: its usage is on standard error' }, name);
      }
      const version = await runCli(['--version']);
      assert.equal(version.code, 0);
      assert.match(version.stdout, /^\d+\.\d+\.\d+\S*\n$/);
      for (const args of [['--version', '--json'], ['--json', '-V']]) {
        const json = await runCli(args);
        assert.equal(json.code, 0, args.join(' '));
        assert.deepEqual(JSON.parse(json.stdout), { version: version.stdout.trim() }, args.join(' '));
      }
      assert.equal((await runCli(['tasks', '--help'])).code, 0);
    }));

  test('no running service (exit 3) and no database (exit 74) are documents too', { timeout: 60_000 }, () =>
    withDataDir(async (dataDir) => {
      const notRunning = await runCli(['tasks', 'ls', '--json', '--data-dir', dataDir]);
      assert.equal(notRunning.code, 3);
      assert.equal(failureOf(notRunning).code, 'service_not_running');
      const noDatabase = await runCli(['models', 'ls', '--json', '--data-dir', dataDir]);
      assert.equal(noDatabase.code, 74);
      assert.equal(failureOf(noDatabase).code, 'database_unavailable');
    }));

  test('a data directory that is a file: every command says so (exit 74, database_unavailable), never a stack trace', { timeout: 120_000 }, () =>
    withDataDir(async (dataDir) => {
      const file = join(dataDir, 'not-a-folder');
      writeFileSync(file, 'x');
      for (const args of [['pair'], ['clients', 'ls'], ['clients', 'revoke', 'cli_x'], ['models', 'ls'], ['models', 'add', file], ['config', 'set', 'name', 'x'],
        ['config', 'ls'], ['gc'], ['gc', '--vacuum'], ['doctor'], ['tasks', 'ls'], ['serve', '--port', '0']]) {
        const result = await runCli([...args, '--json', '--data-dir', file]);
        assert.equal(result.code, 74, `${args.join(' ')}: ${result.stderr}`);
        const failure = failureOf(result);
        assert.equal(failure.code, 'database_unavailable', args.join(' '));
        assert.match(failure.message, /it is not a folder/, args.join(' '));
        assert.doesNotMatch(result.stderr, /\n\s+at /, `${args.join(' ')}: no stack trace`);
      }
    }));

  test('lmsp run whose task someone else cancels exits 1; its document is the cancelled response, alone', { timeout: 90_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
      const run = runCli(['run', 'lmsp-tiny', 'go', '--max-tokens', '5000', '--json', '--data-dir', service.dataDir]);
      const task = await waitFor(async () => (await service.client.listTasks({ status: ['running'] })).data[0]);
      assert.equal((await api(service, `/v1/tasks/${task.id}/cancel`, { method: 'POST' })).status, 202);
      const ran = await run;
      assert.equal(ran.code, 1, ran.stderr);
      assert.match(ran.stderr, /was cancelled/);
      const printed = JSON.parse(ran.stdout) as { object: string; status: string };
      assert.equal(printed.object, 'response');
      assert.equal(printed.status, 'cancelled');
    }));
});
