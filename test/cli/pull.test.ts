/**
 * `lmsp models pull` (LMSP 5.1) as a user runs it: through the running service's API, and through
 * the task core on the data directory when no service runs; `--json` prints the model; Ctrl-C
 * cancels the pull and leaves no partial file. Files come from a local server, never the network.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { ModelObject, TaskObject } from '../../src/api/types.js';
import { runCli, startCli } from '../helpers/cli.js';
import { withDataDir } from '../helpers/data-dir.js';
import { sha256Digest, startModelServer, tinyModelBytes, type ModelServer } from '../helpers/model-server.js';
import { api, LMSP_BIN, waitFor, withService } from '../helpers/service.js';

const MODEL = tinyModelBytes();
const DIGEST = sha256Digest(MODEL);

let server: ModelServer;
before(async () => {
  server = await startModelServer();
});
after(() => server.close());

function env(): Record<string, string> {
  return { LMSP_HF_ENDPOINT: server.url };
}

/** Starts `lmsp models pull` on a slow file, sends SIGINT once its partial file has bytes; answers how it ended. */
async function interruptPull(dataDir: string, name: string): Promise<{ code: number | null; stderr: string }> {
  const path = `/cli/${name}.gguf`;
  const url = server.serve(path, MODEL);
  server.behave(path, { bytesPerSecond: 50_000 });
  const child = spawn(process.execPath, [LMSP_BIN, 'models', 'pull', url, '--id', name, '--data-dir', dataDir],
    { env: { ...process.env, ...env() }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const partial = join(dataDir, 'models', `${name}.gguf.partial`);
  await waitFor(() => existsSync(partial) && statSync(partial).size > 0, { timeoutMs: 30_000, what: 'the download to start' });
  child.kill('SIGINT');
  const code = await exited;
  assert.ok(!existsSync(partial), 'the cancelled pull left no partial file');
  return { code, stderr };
}

describe('lmsp models pull (LMSP 5.1)', () => {
  test('with the service running: the pull is the service\'s task; --json prints the model', () => withService({ env: env() }, async (service) => {
    const source = server.serveHf({ owner: 'lmsp', repo: 'cli', file: 'tiny.gguf' }, MODEL);
    const ran = await runCli(['models', 'pull', source, '--id', 'cli-online', '--digest', DIGEST, '--json', '--data-dir', service.dataDir], { env: env() });
    assert.equal(ran.code, 0, ran.stderr);
    const model = JSON.parse(ran.stdout) as ModelObject;
    assert.equal(model.id, 'cli-online');
    assert.equal(model.digest, DIGEST);
    assert.equal(((await (await api(service, '/v1/models/cli-online')).json()) as ModelObject).digest, DIGEST);
    const tasks = (await (await api(service, '/v1/tasks?limit=10')).json()) as { data: TaskObject[] };
    assert.ok(tasks.data.some((task) => task.kind === 'model_pull' && task.model === 'cli-online' && task.status === 'completed'));

    const mismatch = await runCli(['models', 'pull', source, '--id', 'cli-mismatch', '--digest', `sha256:${'1'.repeat(64)}`, '--data-dir', service.dataDir], { env: env() });
    assert.equal(mismatch.code, 1);
    assert.match(mismatch.stderr, /model_digest_mismatch/);

    const taken = await runCli(['models', 'pull', source, '--id', 'cli-online', '--data-dir', service.dataDir], { env: env() });
    assert.equal(taken.code, 1);
    assert.match(taken.stderr, /model_exists/);

    const interrupted = await interruptPull(service.dataDir, 'cli-online-cancelled');
    assert.equal(interrupted.code, 130, interrupted.stderr);
    const cancelled = (await (await api(service, '/v1/tasks?limit=10')).json()) as { data: TaskObject[] };
    assert.equal(cancelled.data.find((task) => task.model === 'cli-online-cancelled')?.status, 'cancelled');

    // Cancelled by someone else (another client, the dashboard): the command failed, exit 1, not 130.
    const path = '/cli/cancelled-elsewhere.gguf';
    const url = server.serve(path, MODEL);
    server.behave(path, { bytesPerSecond: 50_000 });
    const pulling = startCli(['models', 'pull', url, '--id', 'cli-cancelled-elsewhere', '--json', '--data-dir', service.dataDir], { env: env() });
    const pull = await waitFor(async () => ((await (await api(service, '/v1/tasks?kind=model_pull&limit=20')).json()) as { data: TaskObject[] })
      .data.find((task) => task.model === 'cli-cancelled-elsewhere' && task.status === 'running'), { timeoutMs: 30_000, what: 'the pull to run' });
    assert.equal((await api(service, `/v1/tasks/${pull.id}/cancel`, { method: 'POST' })).status, 202);
    assert.equal(await pulling.closed, 1, pulling.stderr());
    assert.equal((JSON.parse(pulling.stdout()) as { error: { code: string } }).error.code, 'task_cancelled');
  }));

  test('with the service running: a follow refused for a moment (429 too_many_streams) is asked again, and one cut by a restart reopened', { timeout: 120_000 }, () =>
    withService({ env: env(), args: ['--max-streams', '1'] }, async (service) => {
      const path = '/cli/limited.gguf';
      const url = server.serve(path, MODEL);
      server.behave(path, { bytesPerSecond: 100_000 });
      // Another client holds the only stream the service allows.
      const holder = new AbortController();
      const busy = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 1 });
      const held = await api(service, `/v1/tasks/${busy.body.task.id}/events?stream=true`, { signal: holder.signal });
      assert.equal(held.status, 200);
      const cli = startCli(['models', 'pull', url, '--id', 'limited', '--json', '--data-dir', service.dataDir], { env: env() });
      await waitFor(() => /too_many_streams/.test(cli.stderr()), { what: 'the CLI to be refused a stream', timeoutMs: 30_000 });
      holder.abort();
      const partial = join(service.dataDir, 'models', 'limited.gguf.partial');
      await waitFor(() => existsSync(partial) && statSync(partial).size > 0, { timeoutMs: 30_000, what: 'the download to start' });
      await service.kill();
      await service.restart({ env: env(), args: ['--max-streams', '1'] });
      assert.equal(await cli.closed, 0, cli.stderr());
      const model = JSON.parse(cli.stdout()) as ModelObject;
      assert.equal(model.id, 'limited');
      assert.equal(model.digest, DIGEST);
      assert.match(cli.stderr(), /connection lost; following the pull/);
      // Each outage is said once, however many tries it takes.
      assert.equal(cli.stderr().match(/connection lost; following the pull/g)?.length, 1, cli.stderr());
      assert.equal(cli.stderr().match(/too_many_streams/g)?.length, 1, cli.stderr());
    }));

  test('without a running service: the same task through the task core, then the service knows the model', () => withDataDir(async (dataDir) => {
    const url = server.serve('/cli/offline.gguf', MODEL);
    const ran = await runCli(['models', 'pull', url, '--id', 'cli-offline', '--json', '--data-dir', dataDir], { env: env() });
    assert.equal(ran.code, 0, ran.stderr);
    const model = JSON.parse(ran.stdout) as ModelObject;
    assert.deepEqual([model.id, model.digest, model.size_bytes], ['cli-offline', DIGEST, MODEL.length]);
    assert.ok(!existsSync(join(dataDir, 'models', 'cli-offline.gguf.partial')));
    const listed = JSON.parse((await runCli(['models', 'ls', '--json', '--data-dir', dataDir])).stdout) as { data: ModelObject[] };
    assert.equal(listed.data.find((entry) => entry.id === 'cli-offline')?.digest, DIGEST);
    const human = await runCli(['models', 'pull', url, '--id', 'cli-offline-2', '--data-dir', dataDir], { env: env() });
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^pulled cli-offline-2: sha256:[0-9a-f]{64}/);

    const interrupted = await interruptPull(dataDir, 'cli-offline-cancelled');
    assert.equal(interrupted.code, 130, interrupted.stderr);

    // The service started on this data directory finds the tasks and the models the CLI recorded.
    await withService({ dataDir, env: env() }, async (service) => {
      const tasks = (await (await api(service, '/v1/tasks?limit=10&order=asc')).json()) as { data: TaskObject[] };
      assert.deepEqual(tasks.data.map((task) => [task.kind, task.model, task.status]), [
        ['model_pull', 'cli-offline', 'completed'], ['model_pull', 'cli-offline-2', 'completed'], ['model_pull', 'cli-offline-cancelled', 'cancelled'],
      ]);
      assert.equal(((await (await api(service, '/v1/models/cli-offline')).json()) as ModelObject).digest, DIGEST);
    });
  }, 'cli-pull'));

  test('without a running service, a first pull creates the data directory it is given', () => withDataDir(async (parent) => {
    const dataDir = join(parent, 'not-yet');
    const url = server.serve('/cli/first.gguf', MODEL);
    const ran = await runCli(['models', 'pull', url, '--id', 'cli-first', '--json', '--data-dir', dataDir], { env: env() });
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal((JSON.parse(ran.stdout) as ModelObject).digest, DIGEST);
    assert.equal(statSync(dataDir).mode & 0o777, 0o700);
  }, 'cli-pull-first'));
});
