/**
 * A pull survives a crash (LMSP 5.1, 7.5, 11.3): the service is killed with SIGKILL during a slow
 * download and started again. Under `resume` (the default) the pull continues from the bytes on
 * disk with a range request, seen in the file server's own log, and the final digest is the whole
 * file's; under `retry` it starts over from byte 0; under `fail` it fails with server_restarted
 * and leaves no partial file.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import type { ModelObject, TaskEvent, TaskObject } from '../../src/api/types.js';
import { sha256Digest, startModelServer, tinyModelBytes, type ModelServer } from '../helpers/model-server.js';
import { makeDataDir } from '../helpers/data-dir.js';
import { api, LMSP_BIN, waitFor, withService, type TestService } from '../helpers/service.js';

const MODEL = tinyModelBytes();
const DIGEST = sha256Digest(MODEL);

let server: ModelServer;
before(async () => {
  server = await startModelServer();
});
after(() => server.close());

async function eventsOf(service: TestService, taskId: string): Promise<TaskEvent[]> {
  return ((await (await api(service, `/v1/tasks/${taskId}/events?limit=1000`)).json()) as { data: TaskEvent[] }).data;
}

async function finished(service: TestService, taskId: string): Promise<TaskObject> {
  return waitFor(async () => {
    const task = (await (await api(service, `/v1/tasks/${taskId}`)).json()) as TaskObject;
    return task.finished_at !== null ? task : null;
  }, { timeoutMs: 60_000, what: `task ${taskId} to finish` });
}

/** Starts a slow pull of a fresh path and kills the service once at least 40% of the file is on disk. */
async function killDuringPull(service: TestService, name: string, onRestart: string): Promise<{ task: TaskObject; path: string; partial: string }> {
  const path = `/crash/${name}.gguf`;
  const url = server.serve(path, MODEL);
  server.behave(path, { bytesPerSecond: 80_000 });
  const answer = await api(service, '/v1/models/pull', { method: 'POST', json: { source: url, id: name, on_restart: onRestart } });
  assert.equal(answer.status, 202);
  const task = (await answer.json()) as TaskObject;
  const partial = join(service.dataDir, 'models', `${name}.gguf.partial`);
  await waitFor(() => existsSync(partial) && statSync(partial).size >= MODEL.length * 0.4, { timeoutMs: 30_000, what: '40% of the file on disk' });
  await service.kill();
  assert.ok(statSync(partial).size < MODEL.length, 'killed before the end');
  server.behave(path, {}); // full speed from now on
  return { task, path, partial };
}

describe('a pull killed with SIGKILL (LMSP 5.1, 7.5)', () => {
  test('resume (the default): continues from the bytes on disk with a Range request; the digest is right', () => withService({ env: { LMSP_HF_ENDPOINT: server.url } }, async (service) => {
    const { task, path, partial } = await killDuringPull(service, 'crash-resume', 'resume');
    const onDisk = statSync(partial).size;
    const restarted = await service.restart();
    const done = await finished(restarted, task.id);
    assert.equal(done.status, 'completed');
    assert.equal(done.attempt, 1);
    const requests = server.requestsTo(path);
    assert.equal(requests.length, 2, 'one request before the kill, one after');
    assert.equal(requests[0]!.range, null);
    assert.equal(requests[1]!.range, `bytes=${onDisk}-`, 'the resume asks for the bytes after those on disk');
    assert.ok(requests[1]!.ifRange, 'with If-Range, so that a changed file starts over');
    assert.equal(requests[1]!.status, 206);
    assert.equal(requests[1]!.bodyBytesSent, MODEL.length - onDisk, 'only the rest was transferred');
    const events = await eventsOf(restarted, task.id);
    const resumed = events.find((event) => event.type === 'model.pull.resumed');
    assert.ok(resumed, events.map((event) => event.type).join(', '));
    assert.equal(resumed.downloaded_bytes, onDisk, 'model.pull.resumed carries the bytes already on disk');
    assert.equal(events.at(-1)!.type, 'model.pull.completed');
    events.forEach((event, index) => assert.equal(event.sequence_number, index + 1));
    const model = (await (await api(restarted, '/v1/models/crash-resume')).json()) as ModelObject;
    assert.equal(model.digest, DIGEST);
    assert.ok(!existsSync(partial));
  }));

  test('a link planted at the partial file\'s name while the service was down is replaced, never written through', () =>
    withService({ env: { LMSP_HF_ENDPOINT: server.url } }, async (service) => {
      const { task, partial } = await killDuringPull(service, 'crash-planted', 'resume');
      // Someone who can write to the models directory swaps the partial file for a link.
      const outside = join(service.dataDir, 'precious.bin');
      renameSync(partial, outside);
      const before = readFileSync(outside);
      symlinkSync(outside, partial);
      const restarted = await service.restart();
      const done = await finished(restarted, task.id);
      assert.equal(done.status, 'completed', JSON.stringify(done.error));
      assert.deepEqual(readFileSync(outside), before, 'the file the link pointed to is untouched');
      const model = (await (await api(restarted, '/v1/models/crash-planted')).json()) as ModelObject;
      assert.equal(model.digest, DIGEST, 'the model is the whole file, fetched again');
      // Nothing about the file the link named reaches the pull's client either.
      const resumed = (await eventsOf(restarted, task.id)).filter((event) => event.type === 'model.pull.resumed');
      assert.ok(resumed.every((event) => event.downloaded_bytes === 0), `resumed with ${resumed.map((event) => String(event.downloaded_bytes)).join(', ')} bytes`);
    }));

  test('a pull of the CLI without a service, killed, is continued by the service\'s next start with a Range request', async () => {
    const dataDir = makeDataDir('pull-cli-killed');
    const path = '/crash/cli-killed.gguf';
    const url = server.serve(path, MODEL);
    server.behave(path, { bytesPerSecond: 80_000 });
    const cli = spawn(process.execPath, [LMSP_BIN, 'models', 'pull', url, '--id', 'cli-killed', '--data-dir', dataDir],
      { env: { ...process.env, LMSP_HF_ENDPOINT: server.url }, stdio: 'ignore' });
    const exited = new Promise((resolve) => cli.once('exit', resolve));
    const partial = join(dataDir, 'models', 'cli-killed.gguf.partial');
    await waitFor(() => existsSync(partial) && statSync(partial).size >= MODEL.length * 0.4, { timeoutMs: 30_000, what: '40% of the file on disk' });
    cli.kill('SIGKILL');
    await exited;
    const onDisk = statSync(partial).size;
    server.behave(path, {});
    await withService({ dataDir, env: { LMSP_HF_ENDPOINT: server.url } }, async (service) => {
      const tasks = (await (await api(service, '/v1/tasks?limit=5')).json()) as { data: TaskObject[] };
      const task = tasks.data.find((entry) => entry.model === 'cli-killed')!;
      assert.equal((await finished(service, task.id)).status, 'completed');
      const requests = server.requestsTo(path);
      assert.equal(requests.length, 2);
      assert.equal(requests[1]!.range, `bytes=${onDisk}-`);
      assert.equal(((await (await api(service, '/v1/models/cli-killed')).json()) as ModelObject).digest, DIGEST);
    });
  });

  for (const [policy, attempt] of [['resume', 1], ['retry', 2]] as const) {
    test(`${policy}: a crash after the whole file was moved into place, before the model was recorded, still ends with the model`, () =>
      withService({ env: { LMSP_HF_ENDPOINT: server.url } }, async (service) => {
        const name = `crash-moved-${policy}`;
        const { task, partial } = await killDuringPull(service, name, policy);
        // What the service leaves when it dies in that window: the digest and size recorded, then
        // the whole file moved to its final name (crafted here, as the window is a few milliseconds).
        const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'));
        db.prepare('UPDATE model_pulls SET digest = ?, size_bytes = ? WHERE task_id = ?').run(DIGEST, MODEL.length, task.id);
        db.close();
        writeFileSync(join(service.dataDir, 'models', `${name}.gguf`), MODEL);
        rmSync(partial);
        const restarted = await service.restart();
        const done = await finished(restarted, task.id);
        assert.equal(done.status, 'completed', JSON.stringify(done.error));
        assert.equal(done.attempt, attempt);
        const model = (await (await api(restarted, `/v1/models/${name}`)).json()) as ModelObject;
        assert.equal(model.digest, DIGEST);
        assert.equal(model.status, 'ready');
      }));
  }

  test('retry: starts over from byte 0 as attempt 2', () => withService({ env: { LMSP_HF_ENDPOINT: server.url } }, async (service) => {
    const { task, path } = await killDuringPull(service, 'crash-retry', 'retry');
    const restarted = await service.restart();
    const done = await finished(restarted, task.id);
    assert.equal(done.status, 'completed');
    assert.equal(done.attempt, 2);
    const requests = server.requestsTo(path);
    assert.equal(requests.length, 2);
    assert.equal(requests[1]!.range, null, 'the new attempt asks for the whole file');
    const types = (await eventsOf(restarted, task.id)).map((event) => event.type);
    assert.ok(types.includes('model.pull.queued'), types.join(', '));
    assert.equal(((await (await api(restarted, '/v1/models/crash-retry')).json()) as ModelObject).digest, DIGEST);
  }));

  test('fail: server_restarted, and no partial file is left', () => withService({ env: { LMSP_HF_ENDPOINT: server.url } }, async (service) => {
    const { task, partial } = await killDuringPull(service, 'crash-fail', 'fail');
    const restarted = await service.restart();
    const done = await finished(restarted, task.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error?.code, 'server_restarted');
    assert.equal((await eventsOf(restarted, task.id)).at(-1)!.type, 'model.pull.failed');
    assert.ok(!existsSync(partial));
    assert.equal((await api(restarted, '/v1/models/crash-fail')).status, 404);
  }));
});
