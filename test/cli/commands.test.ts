import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { chmodSync, closeSync, openSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { CreateResponseBody, TaskObject } from '../../src/api/types.js';
import { lockDataDir } from '../../src/store/lock.js';
import { runCli, startCli, type RunningCli } from '../helpers/cli.js';
import { api, LMSP_BIN, waitFor, withService, type TestService } from '../helpers/service.js';

async function json<T>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

/** `lmsp tasks events --follow --json` on a background response, once it has printed more than `lines` lines. */
async function followBackground(service: TestService, create: Omit<CreateResponseBody, 'model' | 'input' | 'background'>, lines: number): Promise<{ taskId: string; cli: RunningCli }> {
  const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, ...create });
  const cli = startCli(['tasks', 'events', created.body.task.id, '--follow', '--json', '--data-dir', service.dataDir]);
  await waitFor(() => cli.stdout().split('\n').length > lines, { what: 'some followed events' });
  return { taskId: created.body.task.id, cli };
}

describe('the lmsp CLI as a client of the running service (LMSP section 12)', () => {
  test('run streams the text; --background prints the response id; tasks ls/show/events/cancel', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const dir = ['--data-dir', service.dataDir];
      const ran = await runCli(['run', 'lmsp-tiny', 'tell', 'me', 'something', '--seed', '5', '--max-tokens', '30', ...dir]);
      assert.equal(ran.code, 0, ran.stderr);
      const tasks = JSON.parse((await runCli(['tasks', 'ls', '--json', ...dir])).stdout) as { data: TaskObject[] };
      assert.equal(tasks.data.length, 1);
      // The options every command takes work before the command too; after it, the command's own win.
      const before = await runCli(['--data-dir', service.dataDir, '--json', 'tasks', 'ls']);
      assert.equal(before.code, 0, before.stderr);
      assert.deepEqual((JSON.parse(before.stdout) as typeof tasks).data.map((task) => task.id), [tasks.data[0]!.id]);
      const own = await runCli(['--data-dir', join(service.dataDir, 'elsewhere'), 'tasks', 'ls', '--json', ...dir]);
      assert.equal(own.code, 0, own.stderr);
      assert.equal((JSON.parse(own.stdout) as typeof tasks).data.length, 1);
      // Before the subcommand, after its group (`lmsp tasks --json --data-dir D ls`), they count as
      // well, and the nearest to the command wins.
      const group = await runCli(['--data-dir', join(service.dataDir, 'elsewhere'), 'tasks', '--json', ...dir, 'ls']);
      assert.equal(group.code, 0, group.stderr);
      assert.deepEqual((JSON.parse(group.stdout) as typeof tasks).data.map((task) => task.id), [tasks.data[0]!.id]);
      const models = await runCli(['models', ...dir, '--json', 'ls']);
      assert.equal(models.code, 0, models.stderr);
      assert.ok((JSON.parse(models.stdout) as { data: Array<{ id: string }> }).data.some((model) => model.id === 'lmsp-tiny'));
      const response = await service.client.getResponse(tasks.data[0]!.response_id!);
      assert.equal(ran.stdout, `${response.output[0]!.content[0]!.text}\n`, 'the streamed text is the response text');
      assert.equal(response.seed, 5);
      assert.equal(response.usage?.output_tokens, 30);

      const background = await runCli(['run', 'lmsp-tiny', 'later', '--background', '--max-tokens', '5', ...dir]);
      assert.equal(background.code, 0, background.stderr);
      assert.match(background.stdout.trim(), /^resp_[0-9A-Za-z]+$/);
      // The id it prints is enough for the tasks commands.
      const byResponse = JSON.parse((await runCli(['tasks', 'show', background.stdout.trim(), '--json', ...dir])).stdout) as { task: TaskObject; response: { id: string } };
      assert.equal(byResponse.response.id, background.stdout.trim());
      assert.equal(byResponse.task.response_id, background.stdout.trim());
      const eventsByResponse = JSON.parse((await runCli(['tasks', 'events', background.stdout.trim(), '--json', ...dir])).stdout) as { data: Array<{ type: string }> };
      assert.equal(eventsByResponse.data[0]!.type, 'response.created');

      const table = await runCli(['tasks', 'ls', ...dir]);
      assert.match(table.stdout, /^ID\s+KIND\s+STATUS\s+MODEL/);
      assert.equal(table.stdout.trim().split('\n').length, 3);

      const taskId = tasks.data[0]!.id;
      const shown = await runCli(['tasks', 'show', taskId, ...dir]);
      assert.match(shown.stdout, new RegExp(`task\\s+${taskId}`));
      const shownJson = JSON.parse((await runCli(['tasks', 'show', taskId, '--json', ...dir])).stdout) as { task: TaskObject };
      assert.equal(shownJson.task.id, taskId);

      // LMSP 12: --json prints one JSON document.
      const events = await runCli(['tasks', 'events', taskId, '--json', ...dir]);
      const list = JSON.parse(events.stdout) as { object: string; data: Array<{ sequence_number: number; type: string }>; has_more: boolean };
      assert.equal(list.object, 'list');
      assert.equal(list.has_more, false);
      assert.deepEqual(list.data.map((line) => line.sequence_number), list.data.map((_, index) => index + 1));
      const after = await runCli(['tasks', 'events', taskId, '--after', '3', '--json', ...dir]);
      assert.equal((JSON.parse(after.stdout) as typeof list).data[0]!.sequence_number, 4);
      const none = await runCli(['tasks', 'events', taskId, '--after', '100000', '--json', ...dir]);
      assert.deepEqual(JSON.parse(none.stdout), { object: 'list', data: [], has_more: false });
      const human = await runCli(['tasks', 'events', taskId, ...dir]);
      assert.match(human.stdout, /response\.created/);

      const missing = await runCli(['tasks', 'show', 'task_nope', ...dir]);
      assert.notEqual(missing.code, 0);
      assert.match(missing.stderr, /not_found/);
    }));

  test('tasks events --follow tails a live task to its end; tasks cancel stops one', { timeout: 90_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '15' } }, async (service) => {
      const dir = ['--data-dir', service.dataDir];
      const follow = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 60 });
      const followed = await runCli(['tasks', 'events', follow.body.task.id, '--follow', '--json', ...dir]);
      assert.equal(followed.code, 0, followed.stderr);
      const types = (JSON.parse(followed.stdout) as { data: Array<{ type: string }> }).data.map((event) => event.type);
      assert.equal(types[0], 'response.created');
      assert.equal(types.at(-1), 'response.incomplete');

      const long = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 5000 });
      await waitFor(async () => (await service.client.getTask(long.body.task.id)).status === 'running');
      const cancelled = await runCli(['tasks', 'cancel', long.body.task.id, ...dir]);
      assert.equal(cancelled.code, 0, cancelled.stderr);
      assert.match(cancelled.stdout, /cancelling/);
      await waitFor(async () => (await service.client.getTask(long.body.task.id)).status === 'cancelled');
    }));

  test('Ctrl-C during lmsp run cancels the task', { timeout: 90_000 }, () => withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '15' } }, async (service) => {
    const child = spawn(process.execPath, [LMSP_BIN, 'run', 'lmsp-tiny', 'go', '--max-tokens', '5000', '--data-dir', service.dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitFor(() => output.length > 10, { what: 'some streamed text' });
    child.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 130);
    const [task] = (await service.client.listTasks()).data;
    await waitFor(async () => (await service.client.getTask(task!.id)).status === 'cancelled');
  }));

  test('lmsp run whose service goes away mid-stream says which response, as its one JSON document, not a stack trace', { timeout: 90_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '15' } }, async (service) => {
      const cli = startCli(['run', 'lmsp-tiny', 'go', '--max-tokens', '5000', '--json', '--data-dir', service.dataDir]);
      await waitFor(async () => (await service.client.listTasks()).data.some((task) => task.status === 'running' && task.last_sequence_number > 10), { what: 'a running task' });
      const [task] = (await service.client.listTasks()).data;
      await service.kill();
      assert.equal(await cli.closed, 1, cli.stderr());
      assert.doesNotMatch(cli.stderr(), /node:internal|at .*\(/, 'no stack trace');
      const failure = JSON.parse(cli.stdout()) as { error: { code: string; message: string } };
      assert.equal(failure.error.code, 'connection_lost');
      assert.ok(failure.error.message.includes(task!.response_id!), failure.error.message);
      assert.match(cli.stderr(), new RegExp(`lmsp tasks events ${task!.response_id!} --follow`));
    }));

  test('tasks show/events/ls for a chat completion: its id names its task, its text, usage and chunks are shown, --kind filters', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const dir = ['--data-dir', service.dataDir];
      const created = await api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 6, seed: 2, store: true } });
      const completion = (await created.json()) as { id: string; choices: Array<{ message: { content: string } }>; usage: { prompt_tokens: number; completion_tokens: number } };
      await runCli(['run', 'lmsp-tiny', 'another', '--max-tokens', '2', ...dir]);
      const shown = await runCli(['tasks', 'show', completion.id, ...dir]);
      assert.equal(shown.code, 0, shown.stderr);
      assert.match(shown.stdout, new RegExp(`task\\s+${created.headers.get('lmsp-task-id')!} \\(chat_completion\\)`));
      assert.match(shown.stdout, new RegExp(`usage\\s+${completion.usage.prompt_tokens} in, 6 out`));
      assert.ok(shown.stdout.includes(`\n\n${completion.choices[0]!.message.content}\n`), shown.stdout);
      const shownJson = JSON.parse((await runCli(['tasks', 'show', completion.id, '--json', ...dir])).stdout) as { completion: { id: string } };
      assert.equal(shownJson.completion.id, completion.id);
      const events = await runCli(['tasks', 'events', completion.id, ...dir]);
      assert.equal(events.code, 0, events.stderr);
      const deltas = [...events.stdout.matchAll(/chat\.completion\.chunk {2}(".*")$/gm)].map((match) => JSON.parse(match[1]!) as string);
      assert.equal(deltas.join(''), completion.choices[0]!.message.content, events.stdout);
      assert.match(events.stdout, /chat\.completion\.chunk {2}finish_reason=length$/m);
      assert.match(events.stdout, /chat\.completion\.completed {2}finish_reason=length$/m);
      const chats = JSON.parse((await runCli(['tasks', 'ls', '--kind', 'chat_completion', '--json', ...dir])).stdout) as { data: TaskObject[] };
      assert.deepEqual(chats.data.map((task) => task.completion_id), [completion.id]);
      const unknown = await runCli(['tasks', 'ls', '--kind', 'chat', ...dir]);
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /--kind: unknown kind chat; kinds are response, chat_completion, model_pull/);
      const status = await runCli(['tasks', 'ls', '--status', 'done', ...dir]);
      assert.equal(status.code, 2);
      assert.match(status.stderr, /--status: unknown status done; statuses are queued, /);
      const missing = await runCli(['tasks', 'show', 'chatcmpl-nothing', ...dir]);
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /no task of the chat completion chatcmpl-nothing/);
    }));

  test('the CLI says so when the service is not running', { timeout: 30_000 }, () => withService({}, async (service) => {
    await service.stop();
    const result = await runCli(['tasks', 'ls', '--data-dir', service.dataDir]);
    assert.equal(result.code, 3);
    assert.match(result.stderr, /not running.*start it with `lmsp serve`/);
    // Held by another process and no service answering: `lmsp serve` would be refused, so the
    // CLI does not advise it.
    const lock = lockDataDir(service.dataDir);
    try {
      const held = await runCli(['tasks', 'ls', '--data-dir', service.dataDir]);
      assert.equal(held.code, 3);
      assert.match(held.stderr, /not answering .*another lmsp process holds the data directory/);
      assert.doesNotMatch(held.stderr, /start it with/);
    } finally {
      lock.release();
    }
  }));

  test('lmsp doctor passes on a healthy install and fails on a tampered model', { timeout: 60_000 }, () => withService({}, async (service) => {
    const dir = ['--data-dir', service.dataDir];
    const healthy = await runCli(['doctor', '--json', ...dir]);
    assert.equal(healthy.code, 0, healthy.stdout + healthy.stderr);
    const report = JSON.parse(healthy.stdout) as { ok: boolean; checks: Array<{ check: string; status: string }> };
    assert.equal(report.ok, true);
    assert.ok(report.checks.some((check) => check.check === 'service' && check.status === 'ok'));
    const fd = openSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), 'r+');
    writeSync(fd, Buffer.from([1, 2, 3]), 0, 3, 300_000);
    closeSync(fd);
    const broken = await runCli(['doctor', '--verify', ...dir]);
    assert.equal(broken.code, 1);
    assert.match(broken.stdout, /fail\s+model lmsp-tiny: digest is sha256:/);
  }));

  test('lmsp doctor: a database others can read is reported before opening it mends it; a service that holds the data directory but does not answer fails', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const dir = ['--data-dir', service.dataDir];
      chmodSync(join(service.dataDir, 'lmsp.db'), 0o644);
      const open = await runCli(['doctor', ...dir]);
      assert.match(open.stdout, /warn\s+database permissions: mode 644/);
      assert.equal(statSync(join(service.dataDir, 'lmsp.db')).mode & 0o777, 0o600);
      process.kill(service.pid, 'SIGSTOP');
      try {
        const hung = await runCli(['doctor', ...dir]);
        assert.equal(hung.code, 1, hung.stdout);
        assert.match(hung.stdout, new RegExp(`fail\\s+service: ${service.url.replace(/[.]/g, '\\.')} \\(pid ${service.pid}\\) holds the data directory but does not answer`));
      } finally {
        process.kill(service.pid, 'SIGCONT');
      }
    }));
});

describe('lmsp tasks events --json refused half-way', () => {
  test('closes the list it began, so stdout stays one JSON document, and exits non-zero saying why', { timeout: 90_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '15' } }, async (service) => {
      const { cli } = await followBackground(service, { max_output_tokens: 3000 }, 5);
      // An answer, not a dropped connection: the CLI's own token is revoked under it (LMSP 4).
      const clients = await json<{ data: Array<{ id: string; name: string }> }>(await api(service, '/v1/clients?limit=100'));
      const operator = clients.data.find((client) => client.name === 'operator')!;
      assert.equal((await api(service, `/v1/clients/${operator.id}`, { method: 'DELETE' })).status, 200);
      assert.equal(await cli.closed, 1, cli.stderr());
      assert.match(cli.stderr(), /invalid_token/);
      const list = JSON.parse(cli.stdout()) as { object: string; data: Array<{ sequence_number: number }> };
      assert.equal(list.object, 'list');
      assert.ok(list.data.length > 3);
      assert.deepEqual(list.data.map((event) => event.sequence_number), list.data.map((_, index) => index + 1));
    }));
});

describe('lmsp tasks events --follow --json cut short', () => {
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143], ['SIGHUP', 129]] as const) {
    test(`${signal} closes the list, so stdout stays one JSON document, and exits ${code}`, { timeout: 90_000 }, () =>
      withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '15' } }, async (service) => {
        const { taskId, cli } = await followBackground(service, { max_output_tokens: 3000 }, 5);
        cli.child.kill(signal);
        assert.equal(await cli.closed, code, cli.stderr());
        const list = JSON.parse(cli.stdout()) as { object: string; data: Array<{ sequence_number: number }>; has_more: boolean };
        assert.equal(list.object, 'list');
        assert.deepEqual(list.data.map((event) => event.sequence_number), list.data.map((_, index) => index + 1));
        assert.equal(list.has_more, true, 'the task has more events than were listed');
        assert.equal((await service.client.getTask(taskId)).status, 'running', 'following is not cancelling');
      }));
  }

  test('a failure after the list began closes it with has_more true and the error, so a script can tell it from a whole log', { timeout: 90_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '15' } }, async (service) => {
      const { cli } = await followBackground(service, { max_output_tokens: 3000 }, 5);
      // The service dies, and what answers at its address next refuses the follower for good.
      await service.kill();
      const impostor = createServer((_request, response) => {
        response.writeHead(500, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { type: 'server_error', code: 'internal_error', message: 'Something broke.', param: null } }));
      });
      impostor.listen(Number(new URL(service.url).port), '127.0.0.1');
      await once(impostor, 'listening');
      try {
        assert.equal(await cli.closed, 1, cli.stderr());
      } finally {
        impostor.close();
      }
      const list = JSON.parse(cli.stdout()) as { data: Array<{ sequence_number: number }>; has_more: boolean; error: { code: string; status: number; message: string } };
      assert.ok(list.data.length > 0);
      assert.deepEqual(list.data.map((event) => event.sequence_number), list.data.map((_, index) => index + 1));
      assert.equal(list.has_more, true);
      assert.deepEqual([list.error.code, list.error.status, list.error.message], ['internal_error', 500, 'Something broke.']);
      assert.match(cli.stderr(), /Something broke\. \(500 internal_error\)/);
    }));
});

describe('lmsp tasks events --follow across a crash', () => {
  test('reconnects after the service restarts and prints every event once, in order', { timeout: 90_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '15' } }, async (service) => {
      const { cli } = await followBackground(service, { max_output_tokens: 300, on_restart: 'resume', seed: 4 }, 20);
      await service.kill();
      await service.restart();
      assert.equal(await cli.closed, 0, cli.stderr());
      assert.match(cli.stderr(), /reconnecting after event \d+/);
      const events = (JSON.parse(cli.stdout()) as { data: Array<{ sequence_number: number; type: string }> }).data;
      assert.deepEqual(events.map((event) => event.sequence_number), events.map((_, index) => index + 1), 'every event once, in order');
      assert.ok(events.some((event) => event.type === 'response.resumed'));
      assert.equal(events.at(-1)!.type, 'response.incomplete');
    }));
});
