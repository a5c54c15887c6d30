/**
 * Pulls from hostile servers through the real service (LMSP 5.1): a server that declares a file
 * larger than the disk can hold, or one that stops sending in the middle of the body, must end
 * the pull quickly with `download_failed`, leaving no partial file and no model.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { TaskEvent, TaskObject } from '../../src/api/types.js';
import { DISK_RESERVE_BYTES } from '../../src/models/download.js';
import { startModelServer, tinyModelBytes, type ModelServer } from '../helpers/model-server.js';
import { api, waitFor, withService, type TestService } from '../helpers/service.js';

const MODEL = tinyModelBytes();

let server: ModelServer;

before(async () => {
  server = await startModelServer();
});
after(async () => {
  await server?.close();
});

async function pullToEnd(service: TestService, body: unknown, timeoutMs: number): Promise<{ task: TaskObject; elapsedMs: number; events: TaskEvent[] }> {
  const startedAt = Date.now();
  const answer = await api(service, '/v1/models/pull', { method: 'POST', json: body });
  assert.equal(answer.status, 202, await answer.clone().text());
  const created = (await answer.json()) as TaskObject;
  const task = await waitFor(async () => {
    const current = (await (await api(service, `/v1/tasks/${created.id}`)).json()) as TaskObject;
    return current.finished_at !== null ? current : null;
  }, { timeoutMs, what: `pull ${created.id} to end` });
  const elapsedMs = Date.now() - startedAt;
  const events = ((await (await api(service, `/v1/tasks/${created.id}/events?limit=1000`)).json()) as { data: TaskEvent[] }).data;
  return { task, elapsedMs, events };
}

async function assertNothingLeft(service: TestService, id: string): Promise<void> {
  const modelsDir = join(service.dataDir, 'models');
  assert.ok(!existsSync(join(modelsDir, `${id}.gguf.partial`)), 'no partial file is left');
  assert.ok(!existsSync(join(modelsDir, `${id}.gguf`)), 'no model file is left');
  assert.equal((await api(service, `/v1/models/${id}`)).status, 404, 'no model is registered');
}

function assertFailedEvents(events: TaskEvent[], code: string): void {
  const types = events.map((event) => event.type);
  assert.equal(types[0], 'model.pull.created');
  assert.equal(types[1], 'model.pull.in_progress');
  assert.equal(types.at(-1), 'model.pull.failed', types.join(', '));
  assert.ok(types.slice(2, -1).every((type) => type === 'model.pull.progress'), types.join(', '));
  assert.equal((events.at(-1)!.error as { code: string }).code, code);
}

describe('pulls from hostile servers (LMSP 5.1)', () => {
  test('a file declared larger than the free disk fails at once with download_failed, before it fills the disk', () =>
    withService({ env: { LMSP_HF_ENDPOINT: server.url } }, async (service) => {
      const path = '/files/petabyte.gguf';
      const url = server.serve(path, MODEL);
      // A petabyte declared; a few real bytes, then silence (a server that would feed the disk forever).
      server.behave(path, { declaredLength: 2 ** 50, stallAfterBytes: 4096 });
      const { task, elapsedMs, events } = await pullToEnd(service, { source: url, id: 'petabyte' }, 20_000);
      assert.equal(task.status, 'failed');
      assert.equal(task.error?.code, 'download_failed');
      assert.match(task.error!.message, /disk/);
      assert.ok(elapsedMs < 10_000, `it failed after ${elapsedMs} ms`);
      assert.equal(server.requestsTo(path).length, 1, 'a lack of space is not retried');
      assertFailedEvents(events, 'download_failed');
      await assertNothingLeft(service, 'petabyte');
    }));

  test('a file that would leave less than the reserve free fails at once: the database keeps room for its commits', () =>
    withService({ env: { LMSP_HF_ENDPOINT: server.url } }, async (service) => {
      const path = '/files/just-fits.gguf';
      const url = server.serve(path, MODEL);
      // Declared to fit the free space with half the reserve to spare.
      const disk = await statfs(join(service.dataDir, 'models'));
      server.behave(path, { declaredLength: disk.bavail * disk.bsize - DISK_RESERVE_BYTES / 2, stallAfterBytes: 4096 });
      const { task, elapsedMs, events } = await pullToEnd(service, { source: url, id: 'just-fits' }, 20_000);
      assert.equal(task.status, 'failed');
      assert.equal(task.error?.code, 'download_failed');
      assert.match(task.error!.message, /stay free for the database/);
      assert.ok(elapsedMs < 10_000, `it failed after ${elapsedMs} ms`);
      assertFailedEvents(events, 'download_failed');
      await assertNothingLeft(service, 'just-fits');
    }));

  test('a server that stalls mid-body is dropped after LMSP_PULL_IDLE_TIMEOUT, retried, then fails with download_failed', () =>
    withService({ env: { LMSP_HF_ENDPOINT: server.url, LMSP_PULL_IDLE_TIMEOUT: '500ms' } }, async (service) => {
      const path = '/files/stalls.gguf';
      const url = server.serve(path, MODEL);
      // Every answer sends a little, then nothing, keeping the connection open.
      server.behave(path, { stallAfterBytes: 4096 });
      const { task, events } = await pullToEnd(service, { source: url, id: 'stalls' }, 30_000);
      assert.equal(task.status, 'failed');
      assert.equal(task.error?.code, 'download_failed');
      assert.match(task.error!.message, /no data .* for 500 ms/);
      const requests = server.requestsTo(path);
      assert.equal(requests.length, 4, 'the first attempt and three resumes');
      assert.equal(requests[1]!.range, 'bytes=4096-', 'a resume asks for the rest');
      assertFailedEvents(events, 'download_failed');
      await assertNothingLeft(service, 'stalls');
    }));
});
