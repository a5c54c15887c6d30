/**
 * Model pulls through the real service (LMSP 5.1): `POST /v1/models/pull` makes a `model_pull`
 * task whose events report the download; the model is registered with its digest once the file
 * is whole, and every failure leaves no partial file and no model. Files come from a local
 * server (test/helpers/model-server.ts) behind LMSP_HF_ENDPOINT; nothing touches the network.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { ModelObject, TaskEvent, TaskObject } from '../../src/api/types.js';
import { retryAfterMs } from '../../src/models/download-errors.js';
import { MAX_RETRY_AFTER_MS } from '../../src/tasks/pulls.js';
import { sha256Digest, startModelServer, tinyModelBytes, type ModelServer } from '../helpers/model-server.js';
import { makeDataDir } from '../helpers/data-dir.js';
import { api, pairClient, startService, waitFor, withService, type TestService } from '../helpers/service.js';

const MODEL = tinyModelBytes();
const DIGEST = sha256Digest(MODEL);
const HALF = Math.floor(MODEL.length / 2);

let server: ModelServer;
let service: TestService;

before(async () => {
  server = await startModelServer();
  service = await startService({ env: { LMSP_HF_ENDPOINT: server.url } });
});
after(async () => {
  await service?.kill();
  await server?.close();
});

function pull(body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return api(service, '/v1/models/pull', { method: 'POST', json: body, headers });
}

async function started(body: unknown): Promise<TaskObject> {
  const answer = await pull(body);
  assert.equal(answer.status, 202, await answer.clone().text());
  const task = (await answer.json()) as TaskObject;
  assert.equal(answer.headers.get('location'), `/v1/tasks/${task.id}`);
  return task;
}

async function finished(taskId: string): Promise<TaskObject> {
  return waitFor(async () => {
    const task = (await (await api(service, `/v1/tasks/${taskId}`)).json()) as TaskObject;
    return task.finished_at !== null ? task : null;
  }, { timeoutMs: 60_000, what: `task ${taskId} to finish` });
}

async function eventsOf(taskId: string): Promise<TaskEvent[]> {
  const page = (await (await api(service, `/v1/tasks/${taskId}/events?limit=1000`)).json()) as { data: TaskEvent[] };
  return page.data;
}

function modelsDir(): string {
  return join(service.dataDir, 'models');
}

async function assertNothingLeft(id: string): Promise<void> {
  assert.ok(!existsSync(join(modelsDir(), `${id}.gguf.partial`)), 'no partial file is left');
  assert.ok(!existsSync(join(modelsDir(), `${id}.gguf`)), 'no model file is left');
  assert.equal((await api(service, `/v1/models/${id}`)).status, 404, 'no model is registered');
}

describe('model pulls (LMSP 5.1)', () => {
  test('a pull completes: 202, model.pull.* events, the model registered with the digest of its bytes', async () => {
    const url = server.serve('/files/tiny.gguf', MODEL);
    const task = await started({ source: url, id: 'pulled-plain', digest: DIGEST });
    assert.equal(task.kind, 'model_pull');
    assert.equal(task.model, 'pulled-plain');
    assert.equal(task.on_restart, 'resume', 'a pull resumes after a restart by default');
    assert.equal((await finished(task.id)).status, 'completed');
    const events = await eventsOf(task.id);
    const types = events.map((event) => event.type);
    assert.equal(types[0], 'model.pull.created');
    assert.equal(types[1], 'model.pull.in_progress');
    assert.equal(types.at(-1), 'model.pull.completed');
    assert.ok(types.slice(2, -1).every((type) => type === 'model.pull.progress'), types.join(', '));
    // Even a pull faster than the one-a-second limit reports its bytes once before it completes.
    assert.ok(types.length >= 4, types.join(', '));
    assert.equal(events.at(-2)!.downloaded_bytes, MODEL.length);
    assert.equal(events.at(-2)!.total_bytes, MODEL.length);
    assert.deepEqual(events.map((event) => event.sequence_number), events.map((_, index) => index + 1), 'gapless from 1');
    const model = events.at(-1)!.model as ModelObject;
    assert.equal(model.id, 'pulled-plain');
    assert.equal(model.digest, DIGEST);
    assert.equal(model.size_bytes, MODEL.length);
    const registered = (await (await api(service, '/v1/models/pulled-plain')).json()) as ModelObject;
    assert.equal(registered.digest, DIGEST);
    assert.equal(registered.status, 'ready');
    assert.equal(registered.architecture, model.architecture);
    assert.ok(existsSync(join(modelsDir(), 'pulled-plain.gguf')));
    assert.ok(!existsSync(join(modelsDir(), 'pulled-plain.gguf.partial')));
    // The pulled model serves a generation.
    const response = await service.client.createResponse({ model: 'pulled-plain', input: 'hello', max_output_tokens: 4 });
    assert.equal(response.body.status, 'incomplete');
  });

  test('hf: sources are fetched from <LMSP_HF_ENDPOINT>/OWNER/REPO/resolve/REVISION/FILE; the id defaults to the file name', async () => {
    const source = server.serveHf({ owner: 'lmsp', repo: 'tiny-GGUF', file: 'Tiny-Model.Q8_0.gguf', revision: 'v2' }, MODEL);
    const task = await started({ source });
    assert.equal(task.model, 'tiny-model.q8_0');
    assert.equal((await finished(task.id)).status, 'completed');
    assert.equal(server.requestsTo('/lmsp/tiny-GGUF/resolve/v2/Tiny-Model.Q8_0.gguf').length, 1);
    assert.equal(((await (await api(service, '/v1/models/tiny-model.q8_0')).json()) as ModelObject).digest, DIGEST);
  });

  test('null optional fields count as absent: the id from the file name, no digest, on_restart resume', async () => {
    const url = server.serve('/files/Null-Fields.gguf', MODEL);
    const task = await started({ source: url, id: null, digest: null, on_restart: null });
    assert.equal(task.model, 'null-fields');
    assert.equal(task.on_restart, 'resume');
    assert.equal((await finished(task.id)).status, 'completed');
  });

  test('a digest that does not match fails with model_digest_mismatch: no partial file, no model', async () => {
    const url = server.serve('/files/mismatch.gguf', MODEL);
    const task = await started({ source: url, id: 'pulled-mismatch', digest: `sha256:${'0'.repeat(64)}` });
    const done = await finished(task.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error?.code, 'model_digest_mismatch');
    const last = (await eventsOf(task.id)).at(-1)!;
    assert.equal(last.type, 'model.pull.failed');
    assert.equal((last.error as { code: string }).code, 'model_digest_mismatch');
    await assertNothingLeft('pulled-mismatch');
  });

  test('a connection dropped halfway is continued with a Range request, and the digest is the whole file\'s', async () => {
    const path = '/files/dropped-once.gguf';
    const url = server.serve(path, MODEL);
    server.behaveOnce(path, { dropAfterBytes: HALF });
    const task = await started({ source: url, id: 'pulled-dropped-once' });
    assert.equal((await finished(task.id)).status, 'completed');
    const requests = server.requestsTo(path);
    assert.equal(requests.length, 2);
    assert.equal(requests[0]!.range, null);
    assert.equal(requests[1]!.range, `bytes=${HALF}-`, 'the second request asks for the rest only');
    assert.equal(((await (await api(service, '/v1/models/pulled-dropped-once')).json()) as ModelObject).digest, DIGEST);
  });

  test('bytes that came with no ETag or Last-Modified are not continued: a file changed on the server is fetched whole, never spliced', async () => {
    const path = '/files/no-validators.gguf';
    const url = server.serve(path, MODEL, { etag: null });
    // The same size, other bytes past the half that the first answer wrote.
    const changed = Buffer.from(MODEL);
    for (let at = MODEL.length - 1000; at < MODEL.length; at += 1) changed[at] = changed[at]! ^ 0xff;
    server.behaveOnce(path, { dropAfterBytes: HALF });
    server.behaveOnce(path, { replaceBody: changed });
    server.behaveOnce(path, { replaceBody: changed });
    const task = await started({ source: url, id: 'pulled-no-validators' });
    assert.equal((await finished(task.id)).status, 'completed');
    const requests = server.requestsTo(path);
    assert.equal(requests.at(-1)!.range, null, 'the file was asked for whole at last');
    assert.equal(((await (await api(service, '/v1/models/pulled-no-validators')).json()) as ModelObject).digest, sha256Digest(changed),
      'the digest is the new file\'s, not a mix of both');
  });

  test('a pull finished by a 416 (the bytes on disk are the whole file) still reports its bytes in a model.pull.progress', async () => {
    const path = '/files/short-then-416.gguf';
    const url = server.serve(path, MODEL);
    // The whole file under a Content-Length that promises more: read as a dropped connection, then
    // the range for the rest is answered 416 with the file's real size.
    server.behaveOnce(path, { declaredLength: MODEL.length + 5000 });
    const task = await started({ source: url, id: 'pulled-short-then-416' });
    assert.equal((await finished(task.id)).status, 'completed');
    assert.equal(server.requestsTo(path)[1]?.range, `bytes=${MODEL.length}-`);
    const events = await eventsOf(task.id);
    const progress = events.filter((event) => event.type === 'model.pull.progress');
    assert.ok(progress.length >= 1, `a progress event among ${events.map((event) => event.type).join(', ')}`);
    assert.equal(progress.at(-1)!.downloaded_bytes, MODEL.length);
    assert.equal(events.at(-1)!.type, 'model.pull.completed');
  });

  test('a server that keeps dropping the connection fails the pull with download_failed and leaves nothing', async () => {
    const path = '/files/dropped-always.gguf';
    const url = server.serve(path, MODEL);
    server.behave(path, { status: 500 });
    server.behaveOnce(path, { dropAfterBytes: HALF });
    const task = await started({ source: url, id: 'pulled-dropped' });
    const done = await finished(task.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error?.code, 'download_failed');
    assert.match(done.error!.message, /500/);
    await assertNothingLeft('pulled-dropped');
  });

  test('a 429 or 503 with Retry-After is tried again no sooner than it asks (seconds or a date), and a wait past a minute is cut to one', async () => {
    const path = '/files/busy-server.gguf';
    const url = server.serve(path, MODEL);
    server.behaveOnce(path, { status: 429, retryAfter: '2' });
    const date = new Date(Date.now() + 6_000).toUTCString();
    server.behaveOnce(path, { status: 503, retryAfter: date });
    const task = await started({ source: url, id: 'pulled-busy-server' });
    assert.equal((await finished(task.id)).status, 'completed');
    const [first, second, third] = server.requestsTo(path);
    assert.ok(second!.receivedAt - first!.receivedAt >= 1_900, `waited ${second!.receivedAt - first!.receivedAt} ms of the 2 s asked`);
    assert.ok(third!.receivedAt >= Date.parse(date) - 50, `asked again ${Date.parse(date) - third!.receivedAt} ms before the date asked`);
    assert.equal(retryAfterMs('120'), 120_000);
    assert.equal(retryAfterMs('Thu, 01 Jan 1970 00:00:10 GMT', 4_000), 6_000);
    assert.equal(retryAfterMs('soon'), null);
    assert.ok(MAX_RETRY_AFTER_MS <= 60_000, 'a hostile server cannot park a pull for long');
  });

  test('a connection that drops again and again goes on while each try adds to the file: the retries count failures in a row', async () => {
    const path = '/files/flaky.gguf';
    const url = server.serve(path, MODEL);
    // 100,000 bytes an answer: five answers for the whole file, more than the three retries in a row.
    server.behave(path, { dropAfterBytes: 100_000 });
    const task = await started({ source: url, id: 'pulled-flaky', digest: DIGEST });
    const done = await finished(task.id);
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    assert.ok(server.requestsTo(path).length >= 5, `${server.requestsTo(path).length} requests`);
    assert.equal(((await (await api(service, '/v1/models/pulled-flaky')).json()) as ModelObject).digest, DIGEST);
  });

  test('a server that lies about the length (a body longer than its Content-Length) fails with download_failed', async () => {
    const path = '/files/liar.gguf';
    const url = server.serve(path, MODEL);
    server.behave(path, { declaredLength: MODEL.length - 1000 });
    const task = await started({ source: url, id: 'pulled-liar' });
    const done = await finished(task.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error?.code, 'download_failed');
    await assertNothingLeft('pulled-liar');
  });

  test('a file that is not GGUF fails with invalid_model_file', async () => {
    const url = server.serve('/files/not-a-model.gguf', Buffer.from('<html>this is a login page, not a model</html>'.repeat(100)));
    const task = await started({ source: url, id: 'pulled-html' });
    const done = await finished(task.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error?.code, 'invalid_model_file');
    await assertNothingLeft('pulled-html');
  });

  test('cancel: cancelling then cancelled, the partial file removed; progress events at most one a second', async () => {
    const path = '/files/slow.gguf';
    const url = server.serve(path, MODEL);
    server.behave(path, { bytesPerSecond: 60_000 });
    const task = await started({ source: url, id: 'pulled-cancelled' });
    await waitFor(async () => (await eventsOf(task.id)).filter((event) => event.type === 'model.pull.progress').length >= 2,
      { timeoutMs: 30_000, what: 'two progress events' });
    assert.ok(existsSync(join(modelsDir(), 'pulled-cancelled.gguf.partial')), 'the partial file is there while it downloads');
    const cancel = await api(service, `/v1/tasks/${task.id}/cancel`, { method: 'POST' });
    assert.equal(cancel.status, 202);
    assert.equal(((await cancel.json()) as TaskObject).status, 'cancelling');
    assert.equal((await finished(task.id)).status, 'cancelled');
    const events = await eventsOf(task.id);
    assert.deepEqual(events.slice(-2).map((event) => event.type), ['model.pull.cancelling', 'model.pull.cancelled']);
    const progress = events.filter((event) => event.type === 'model.pull.progress');
    for (const event of progress) {
      assert.equal(event.total_bytes, MODEL.length);
      assert.ok((event.downloaded_bytes as number) > 0 && (event.downloaded_bytes as number) < MODEL.length);
    }
    // At most one a second: no two progress events share a second of the clock.
    assert.equal(new Set(progress.map((event) => event.created_at)).size, progress.length);
    await assertNothingLeft('pulled-cancelled');
  });

  test('a folder at the partial file\'s name fails the pull with download_failed, saying so; one put there mid-download does not keep a cancel from ending it', async () => {
    const url = server.serve('/files/folder.gguf', MODEL);
    mkdirSync(join(modelsDir(), 'pulled-folder.gguf.partial'));
    const task = await started({ source: url, id: 'pulled-folder' });
    const done = await finished(task.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error?.code, 'download_failed');
    assert.match(done.error!.message, /a folder has the name of the partial file/);
    assert.ok(statSync(join(modelsDir(), 'pulled-folder.gguf.partial')).isDirectory(), 'a folder lmsp did not make is not removed');
    rmSync(join(modelsDir(), 'pulled-folder.gguf.partial'), { recursive: true });

    const path = '/files/folder-later.gguf';
    const slow = server.serve(path, MODEL);
    server.behave(path, { bytesPerSecond: 60_000 });
    const running = await started({ source: slow, id: 'pulled-folder-later' });
    const partial = join(modelsDir(), 'pulled-folder-later.gguf.partial');
    await waitFor(() => existsSync(partial), { what: 'the partial file' });
    rmSync(partial);
    mkdirSync(partial);
    const cancel = await api(service, `/v1/tasks/${running.id}/cancel`, { method: 'POST' });
    assert.equal(cancel.status, 202, await cancel.clone().text());
    assert.equal((await finished(running.id)).status, 'cancelled');
    rmSync(partial, { recursive: true });
    const after = await started({ source: url, id: 'pulled-folder' });
    assert.equal((await finished(after.id)).status, 'completed', 'pulls go on');
  });

  test('Idempotency-Key: the same request again gets the same task, once', async () => {
    const url = server.serve('/files/idempotent.gguf', MODEL);
    const body = { source: url, id: 'pulled-idempotent' };
    const first = await pull(body, { 'idempotency-key': 'pull-once' });
    assert.equal(first.status, 202);
    const again = await pull(body, { 'idempotency-key': 'pull-once' });
    assert.equal(again.status, 202);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    const [a, b] = [(await first.json()) as TaskObject, (await again.json()) as TaskObject];
    assert.equal(a.id, b.id);
    assert.equal(again.headers.get('location'), `/v1/tasks/${a.id}`);
    const other = await pull({ ...body, id: 'pulled-other' }, { 'idempotency-key': 'pull-once' });
    assert.equal(other.status, 422);
    await finished(a.id);
    assert.equal(server.requestsTo('/files/idempotent.gguf').length, 1, 'one download');
  });

  test('model_exists: a registered id, or one that an unfinished pull targets, gets 409', async () => {
    const existing = await pull({ source: server.serve('/files/exists.gguf', MODEL), id: 'lmsp-tiny' });
    assert.equal(existing.status, 409);
    assert.equal(existing.headers.get('x-should-retry'), 'false');
    const body = (await existing.json()) as { error: { code: string; param: string } };
    assert.deepEqual([body.error.code, body.error.param], ['model_exists', 'id']);

    const path = '/files/busy.gguf';
    const url = server.serve(path, MODEL);
    server.behave(path, { bytesPerSecond: 100_000 });
    const first = await started({ source: url, id: 'pulled-busy' });
    const second = await pull({ source: url, id: 'pulled-busy' });
    assert.equal(second.status, 409);
    assert.equal(((await second.json()) as { error: { code: string } }).error.code, 'model_exists');
    // A registration of the id the pull will register is refused now too, not the pull at its end.
    const registered = await api(service, '/v1/models', { method: 'POST', json: { path: 'lmsp-tiny.gguf', id: 'pulled-busy' } });
    assert.equal(registered.status, 409);
    assert.deepEqual(Object.entries(((await registered.json()) as { error: { code: string; param: string } }).error).filter(([name]) => name === 'code' || name === 'param'),
      [['code', 'model_exists'], ['param', 'id']]);
    assert.equal((await api(service, '/v1/models/pulled-busy')).status, 404, 'nothing was registered');
    // A file already at <id>.gguf, or a link there, even one that leads nowhere: the download could not be put in its place.
    symlinkSync(join(modelsDir(), 'nowhere'), join(modelsDir(), 'pulled-dangling.gguf'));
    const dangling = await pull({ source: url, id: 'pulled-dangling' });
    assert.equal(dangling.status, 409);
    assert.equal(((await dangling.json()) as { error: { code: string } }).error.code, 'model_exists');
    rmSync(join(modelsDir(), 'pulled-dangling.gguf'));
    await api(service, `/v1/tasks/${first.id}/cancel`, { method: 'POST' });
    await finished(first.id);
  });

  test('sources other than hf: and https: (and http: to the configured endpoint) get 400 naming source', async () => {
    for (const source of ['file:///etc/passwd.gguf', 'ftp://example.com/model.gguf', 'http://example.com/model.gguf', 'hf:owner/repo', 'model.gguf']) {
      const answer = await pull({ source });
      assert.equal(answer.status, 400, source);
      const body = (await answer.json()) as { error: { code: string; param: string } };
      assert.deepEqual([body.error.code, body.error.param], ['invalid_request', 'source'], source);
    }
    const badDigest = await pull({ source: `${server.url}/files/x.gguf`, digest: 'md5:abc' });
    assert.equal(((await badDigest.json()) as { error: { param: string } }).error.param, 'digest');
    const badId = await pull({ source: `${server.url}/files/x.gguf`, id: 'Not An Id' });
    assert.equal(((await badId.json()) as { error: { param: string } }).error.param, 'id');
  });

  test('a client with models:write alone follows and cancels its own pulls through /v1/tasks, and sees no other task', async () => {
    const writer = await pairClient(service, ['models:write'], 'writer-only');
    const as = { url: service.url, token: writer.token };
    const path = '/files/followed.gguf';
    const url = server.serve(path, MODEL);
    server.behave(path, { bytesPerSecond: 50_000 });
    const answer = await api(as, '/v1/models/pull', { method: 'POST', json: { source: url, id: 'followed' } });
    assert.equal(answer.status, 202);
    const location = answer.headers.get('location')!;
    const task = (await answer.json()) as TaskObject;
    assert.equal((await api(as, location)).status, 200, 'the Location it was given can be read');
    await waitFor(async () => ((await (await api(as, `${location}/events`)).json()) as { data: TaskEvent[] }).data.some((event) => event.type === 'model.pull.progress') || undefined,
      { what: 'progress events', timeoutMs: 30_000 });
    const cancelled = await api(as, `${location}/cancel`, { method: 'POST' });
    assert.equal(cancelled.status, 202);
    await waitFor(async () => ((await (await api(as, location)).json()) as TaskObject).status === 'cancelled' || undefined, { what: 'the pull to be cancelled' });
    // Its list holds its pulls only; a response task of another client (or its own, had it one) is not its to read.
    const response = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 1 });
    const listed = (await (await api(as, '/v1/tasks?limit=100')).json()) as { data: TaskObject[] };
    assert.deepEqual(listed.data.map((item) => item.id), [task.id]);
    assert.equal((await api(as, `/v1/tasks/${response.body.task.id}`)).status, 404);
    assert.equal(((await (await api(as, '/v1/tasks?kind=response')).json()) as { data: TaskObject[] }).data.length, 0);
  });

  test('pulling needs models:write', async () => {
    const reader = await pairClient(service, ['responses', 'models:read'], 'reader');
    const answer = await api({ url: service.url, token: reader.token }, '/v1/models/pull', { method: 'POST', json: { source: `${server.url}/files/x.gguf` } });
    assert.equal(answer.status, 403);
  });
});

describe('a pull onto a full disk (LMSP 5.1)', () => {
  test('fails with download_failed saying the disk is full, and leaves no partial file', (t) => {
    // The models directory is a tmpfs with room for the built-in model and not much more.
    const modelsDir = makeDataDir('pull-full-disk-models');
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=600k', 'tmpfs', modelsDir], { encoding: 'utf8' });
    if (mounted.status !== 0) {
      t.skip(`mounting a tmpfs is not permitted here (${(mounted.stderr || mounted.error?.message || '').trim()})`);
      return;
    }
    return withService({ args: ['--models-dir', modelsDir], env: { LMSP_HF_ENDPOINT: server.url } }, async (full) => {
      const url = server.serve('/files/too-big.gguf', MODEL);
      // No declared length, so that the disk fills up for real (a declared one is refused before
      // a byte is written: pull-hostile.test.ts).
      server.behave('/files/too-big.gguf', { chunked: true });
      const answer = await api(full, '/v1/models/pull', { method: 'POST', json: { source: url, id: 'too-big' } });
      assert.equal(answer.status, 202);
      const task = (await answer.json()) as TaskObject;
      const done = await waitFor(async () => {
        const current = (await (await api(full, `/v1/tasks/${task.id}`)).json()) as TaskObject;
        return current.finished_at !== null ? current : null;
      }, { timeoutMs: 30_000, what: 'the pull to end' });
      assert.equal(done.status, 'failed');
      assert.equal(done.error?.code, 'download_failed');
      // Out of space as it writes (ENOSPC), or stopped at the room the disk has less the database's reserve.
      assert.match(done.error!.message, /disk is full|the models directory can take/);
      assert.deepEqual(readdirSync(modelsDir).sort(), ['lmsp-tiny.gguf'], 'no partial file is left');
      assert.equal((await api(full, '/v1/models/too-big')).status, 404);
    }).finally(() => {
      spawnSync('umount', [modelsDir]);
      rmSync(modelsDir, { recursive: true, force: true });
    });
  });
});
