import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, closeSync, copyFileSync, cpSync, existsSync, mkdirSync, openSync, readFileSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ModelObject, ResponseObject } from '../../src/api/types.js';
import { runCli } from '../helpers/cli.js';
import { makeDataDir } from '../helpers/data-dir.js';
import { scrape } from '../helpers/prometheus.js';
import { api, pairClient, startService, waitFor, withService, type TestService } from '../helpers/service.js';

function sha256sum(path: string): string {
  try {
    return `sha256:${execFileSync('sha256sum', [path], { encoding: 'utf8' }).split(' ')[0]}`;
  } catch {
    return `sha256:${execFileSync(process.execPath, ['-e', `process.stdout.write(require('crypto').createHash('sha256').update(require('fs').readFileSync(${JSON.stringify(path)})).digest('hex'))`], { encoding: 'utf8' })}`;
  }
}

const tinyPath = (service: TestService) => join(service.dataDir, 'models', 'lmsp-tiny.gguf');

async function register(service: TestService, body: object): Promise<Response> {
  return api(service, '/v1/models', { method: 'POST', json: body });
}

describe('model registry (LMSP section 5)', () => {
  test('lmsp-tiny is registered on first start; its digest is sha256sum of the file', () => withService({}, async (service) => {
    const models = await service.client.listModels();
    assert.deepEqual(models.map((model) => model.id), ['lmsp-tiny']);
    const tiny = models[0]!;
    assert.equal(tiny.digest, sha256sum(tinyPath(service)));
    assert.equal(tiny.object, 'model');
    assert.equal(tiny.owned_by, 'lmsp');
    assert.equal(tiny.format, 'gguf');
    assert.equal(tiny.architecture, 'llama');
    assert.equal(tiny.context_length, 16384);
    assert.equal(tiny.status, 'ready');
    assert.equal(tiny.tokenizer, 'llama');
    assert.equal(tiny.quantization, 'F32');
    assert.ok(tiny.parameters! > 0);
    assert.equal(tiny.path, tinyPath(service));
    const reader = await pairClient(service, ['models:read']);
    const seen = await reader.client.getModel('lmsp-tiny');
    assert.equal('path' in seen, false, 'path only for models:write');
  }));

  test('the same weights under two ids give the same text', () => withService({}, async (service) => {
    copyFileSync(tinyPath(service), join(service.dataDir, 'models', 'twin.gguf'));
    const created = await register(service, { path: 'twin.gguf', id: 'tiny-twin' });
    assert.equal(created.status, 201);
    const twin = (await created.json()) as ModelObject;
    assert.equal(twin.id, 'tiny-twin');
    assert.equal(twin.digest, (await service.client.getModel('lmsp-tiny')).digest);
    const text = async (model: string) => (await service.client.createResponse({ model, input: 'same prompt', seed: 99, max_output_tokens: 50 }))
      .body.output[0]!.content[0]!.text;
    assert.equal(await text('tiny-twin'), await text('lmsp-tiny'));
    // An id already taken is 409 model_exists, as for a pull (LMSP 5.1, 9), and no retry fixes it.
    const again = await register(service, { path: 'twin.gguf', id: 'tiny-twin' });
    assert.equal(again.status, 409);
    assert.equal(again.headers.get('x-should-retry'), 'false');
    const error = ((await again.json()) as { error: { code: string; param: string } }).error;
    assert.deepEqual([error.code, error.param], ['model_exists', 'id']);
    const derived = await register(service, { path: 'lmsp-tiny.gguf' });
    assert.equal(derived.status, 409, 'an id derived from the file name is checked the same way');
    assert.equal(((await derived.json()) as { error: { code: string } }).error.code, 'model_exists');
  }));

  test('bad model files get a clear error and register nothing', () => withService({}, async (service) => {
    const dir = join(service.dataDir, 'models');
    const outside = makeDataDir('outside');
    const original = readFileSync(tinyPath(service));
    writeFileSync(join(dir, 'half.gguf'), original.subarray(0, Math.floor(original.length / 2)));
    writeFileSync(join(dir, 'short.gguf'), original.subarray(0, original.length - 100));
    writeFileSync(join(dir, 'text.gguf'), 'this is not a model\n');
    writeFileSync(join(dir, 'empty.gguf'), '');
    mkdirSync(join(dir, 'folder.gguf'));
    copyFileSync(tinyPath(service), join(outside, 'elsewhere.gguf'));
    symlinkSync(join(outside, 'elsewhere.gguf'), join(dir, 'link.gguf'));
    const cases: Array<[object, string, string]> = [
      [{ path: 'half.gguf' }, 'invalid_model_file', 'path'],
      [{ path: 'short.gguf' }, 'invalid_model_file', 'path'],
      [{ path: 'text.gguf' }, 'invalid_model_file', 'path'],
      [{ path: 'empty.gguf' }, 'invalid_model_file', 'path'],
      [{ path: 'folder.gguf' }, 'invalid_model_file', 'path'],
      [{ path: 'link.gguf' }, 'invalid_request', 'path'],
      [{ path: join(outside, 'elsewhere.gguf') }, 'invalid_request', 'path'],
      [{ path: 'missing.gguf' }, 'invalid_request', 'path'],
      [{ path: 'half.gguf', id: 'Bad Id!' }, 'invalid_request', 'id'],
    ];
    for (const [body, code, param] of cases) {
      const response = await register(service, body);
      assert.equal(response.status, 400, JSON.stringify(body));
      const error = ((await response.json()) as { error: { code: string; param: string; message: string } }).error;
      assert.equal(error.code, code, JSON.stringify(body));
      assert.equal(error.param, param);
      assert.ok(error.message.length > 10);
    }
    assert.deepEqual((await service.client.listModels()).map((model) => model.id), ['lmsp-tiny']);
    rmSync(outside, { recursive: true, force: true });
  }));

  test("a path is read as the kernel reads it: no '..', no file behind a trailing slash, no pull's partial file; the id comes from the name given", () => withService({}, async (service) => {
    const dir = join(service.dataDir, 'models');
    const outside = makeDataDir('outside');
    mkdirSync(join(dir, 'h'));
    mkdirSync(join(dir, 'sub'));
    copyFileSync(tinyPath(service), join(dir, 'h', 'valid.gguf'));
    copyFileSync(tinyPath(service), join(dir, 'h', 'valid2.gguf'));
    copyFileSync(tinyPath(service), join(dir, 'pulled.gguf.partial'));
    mkdirSync(join(outside, 'dir'));
    copyFileSync(tinyPath(service), join(outside, 'h.gguf'));
    // sub/out/.. is the outside folder to the kernel, the models directory to a check by the text.
    symlinkSync(join(outside, 'dir'), join(dir, 'sub', 'out'));
    symlinkSync(join(dir, 'h', 'valid.gguf'), join(dir, 'inlink.gguf'));
    const refused = async (path: string, message: RegExp) => {
      const response = await register(service, { path });
      assert.equal(response.status, 400, path);
      const error = ((await response.json()) as { error: { code: string; param: string; message: string } }).error;
      assert.deepEqual([error.code, error.param], ['invalid_request', 'path'], path);
      assert.match(error.message, message, path);
    };
    await refused('h/valid.gguf/', /^no file at h\/valid\.gguf\/$/);
    await refused('h/valid.gguf/../valid2.gguf', /must not hold '\.\.'/);
    await refused('sub/out/../../h.gguf', /must not hold '\.\.'/);
    await refused('pulled.gguf.partial', /partial download/);
    const linked = await register(service, { path: 'inlink.gguf' });
    assert.equal(linked.status, 201);
    const model = (await linked.json()) as ModelObject;
    assert.equal(model.id, 'inlink', 'named as the client named it, not as the file the link leads to');
    assert.equal(model.path, realpathSync(join(dir, 'h', 'valid.gguf')));
    assert.deepEqual((await service.client.listModels()).map((listed) => listed.id).sort(), ['inlink', 'lmsp-tiny']);
    rmSync(outside, { recursive: true, force: true });
  }));

  test('lmsp models add registers a file anywhere for the operator, with the service running', () => withService({}, async (service) => {
    const outside = makeDataDir('cli-model');
    copyFileSync(tinyPath(service), join(outside, 'My-Model.Q8.gguf'));
    const added = await runCli(['models', 'add', join(outside, 'My-Model.Q8.gguf'), '--json', '--data-dir', service.dataDir]);
    assert.equal(added.code, 0, added.stderr);
    const model = JSON.parse(added.stdout) as ModelObject;
    assert.equal(model.id, 'my-model.q8');
    assert.equal(model.digest, sha256sum(join(outside, 'My-Model.Q8.gguf')));
    const listed = await runCli(['models', 'ls', '--json', '--data-dir', service.dataDir]);
    assert.deepEqual((JSON.parse(listed.stdout) as { data: ModelObject[] }).data.map((m) => m.id).sort(), ['lmsp-tiny', 'my-model.q8']);
    const answer = await service.client.createResponse({ model: 'my-model.q8', input: 'hi', max_output_tokens: 3 });
    assert.equal(answer.body.status, 'incomplete');
    writeFileSync(join(outside, 'broken.gguf'), 'GGUF but not really');
    const broken = await runCli(['models', 'add', join(outside, 'broken.gguf'), '--data-dir', service.dataDir]);
    assert.notEqual(broken.code, 0);
    assert.match(broken.stderr, /not a usable GGUF model/);
    const missing = await runCli(['models', 'add', join(outside, 'nothing.gguf'), '--data-dir', service.dataDir]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no file at .*\(400 invalid_request\)$/m, 'refusals name their status and code alike, made here or by the service');
    const removed = await runCli(['models', 'rm', 'my-model.q8', '--data-dir', service.dataDir]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.ok(existsSync(join(outside, 'My-Model.Q8.gguf')), 'the file stays');
    rmSync(outside, { recursive: true, force: true });
  }));

  test('a tampered file fails its next task with model_digest_mismatch and marks the model', () => withService({}, async (service) => {
    const path = join(service.dataDir, 'models', 'victim.gguf');
    copyFileSync(tinyPath(service), path);
    assert.equal((await register(service, { path: 'victim.gguf', id: 'victim' })).status, 201);
    // Change one byte of the tensor data, keeping the size.
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.from([0x7f]), 0, 1, 200_000);
    closeSync(fd);
    const answer = await service.client.createResponse({ model: 'victim', input: 'hi', max_output_tokens: 3 });
    assert.equal(answer.status, 200);
    assert.equal(answer.body.status, 'failed');
    assert.equal(answer.body.error?.code, 'model_digest_mismatch');
    assert.equal((await service.client.getModel('victim')).status, 'digest_mismatch');
    const verified = (await (await api(service, '/v1/models/victim/verify', { method: 'POST' })).json()) as ModelObject;
    assert.equal(verified.status, 'digest_mismatch');
    // Truncation (a size change) is caught the same way, without waiting for a re-hash to differ.
    const other = join(service.dataDir, 'models', 'shrunk.gguf');
    copyFileSync(tinyPath(service), other);
    assert.equal((await register(service, { path: 'shrunk.gguf', id: 'shrunk' })).status, 201);
    truncateSync(other, 1000);
    const failed = await service.client.createResponse({ model: 'shrunk', input: 'hi', max_output_tokens: 3 });
    assert.equal(failed.body.error?.code, 'model_digest_mismatch');
    // A file that is gone.
    rmSync(other);
    assert.equal(((await (await api(service, '/v1/models/shrunk/verify', { method: 'POST' })).json()) as ModelObject).status, 'missing');
  }));

  test('a loaded model whose file is edited in place is checked before its next use: the task and the embedding fail with model_digest_mismatch', () => withService({}, async (service) => {
    const path = join(service.dataDir, 'models', 'loaded.gguf');
    copyFileSync(tinyPath(service), path);
    assert.equal((await register(service, { path: 'loaded.gguf', id: 'loaded' })).status, 201);
    const first = await service.client.createResponse({ model: 'loaded', input: 'hi', max_output_tokens: 3 });
    assert.equal(first.body.status, 'incomplete');
    assert.equal((await service.client.getModel('loaded')).loaded, true);
    // Same inode, other bytes: llama.cpp's mapping of the file now reads them.
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.from([0x7f]), 0, 1, 200_000);
    closeSync(fd);
    const answer = await service.client.createResponse({ model: 'loaded', input: 'hi', max_output_tokens: 3 });
    assert.equal(answer.body.status, 'failed');
    assert.equal(answer.body.error?.code, 'model_digest_mismatch');
    assert.equal((await service.client.getModel('loaded')).status, 'digest_mismatch');
    // Its runner maps a file that changed: it lets the model go.
    await waitFor(async () => (await service.client.getModel('loaded')).loaded === false, { timeoutMs: 10_000, what: 'the model unloaded' });
    const embedded = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'loaded', input: 'hi' } });
    assert.equal(embedded.status, 409);
    assert.equal(((await embedded.json()) as { error: { code: string } }).error.code, 'model_digest_mismatch');
    // The file put back as it was registered serves again.
    copyFileSync(tinyPath(service), path);
    const verified = (await (await api(service, '/v1/models/loaded/verify', { method: 'POST' })).json()) as ModelObject;
    assert.equal(verified.status, 'ready');
    assert.equal((await service.client.createResponse({ model: 'loaded', input: 'hi', max_output_tokens: 3 })).body.status, 'incomplete');
  }));

  test('a verify that finds a loaded model\'s file changed in place marks it and unloads it', () => withService({}, async (service) => {
    const path = join(service.dataDir, 'models', 'verified.gguf');
    copyFileSync(tinyPath(service), path);
    assert.equal((await register(service, { path: 'verified.gguf', id: 'verified' })).status, 201);
    assert.equal((await service.client.createResponse({ model: 'verified', input: 'hi', max_output_tokens: 3 })).body.status, 'incomplete');
    assert.equal((await service.client.getModel('verified')).loaded, true);
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.from([0x7f]), 0, 1, 200_000);
    closeSync(fd);
    // The same size: only a hash tells, and reading the model does not hash.
    assert.equal((await service.client.getModel('verified')).status, 'ready');
    const verified = (await (await api(service, '/v1/models/verified/verify', { method: 'POST' })).json()) as ModelObject;
    assert.deepEqual([verified.status, verified.loaded], ['digest_mismatch', false]);
    assert.equal((await service.client.getModel('verified')).loaded, false);
  }));

  test('a file changed with its modification time set back is still hashed again before it loads', () => withService({}, async (service) => {
    // Size and mtime alone would pass it: `touch -r` sets an mtime back, nothing sets a ctime back.
    const path = join(service.dataDir, 'models', 'disguised.gguf');
    copyFileSync(tinyPath(service), path);
    assert.equal((await register(service, { path: 'disguised.gguf', id: 'disguised' })).status, 201);
    const before = statSync(path);
    const stamp = join(service.dataDir, 'stamp');
    writeFileSync(stamp, '');
    execFileSync('touch', ['-r', path, stamp]);
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.from([0x7f]), 0, 1, 200_000);
    closeSync(fd);
    execFileSync('touch', ['-r', stamp, path]);
    assert.equal(statSync(path).size, before.size);
    assert.equal(Math.floor(statSync(path).mtimeMs), Math.floor(before.mtimeMs), 'the modification time is the registered one');
    const answer = await service.client.createResponse({ model: 'disguised', input: 'hi', max_output_tokens: 3 });
    assert.equal(answer.body.status, 'failed');
    assert.equal(answer.body.error?.code, 'model_digest_mismatch');
    assert.equal((await service.client.getModel('disguised')).status, 'digest_mismatch');

    // Another file of the same size renamed into its place, its mtime set to the registered one.
    const swapped = join(service.dataDir, 'models', 'swapped-in.gguf');
    copyFileSync(tinyPath(service), join(service.dataDir, 'models', 'original.gguf'));
    assert.equal((await register(service, { path: 'original.gguf', id: 'original' })).status, 201);
    copyFileSync(path, swapped);
    execFileSync('touch', ['-r', join(service.dataDir, 'models', 'original.gguf'), swapped]);
    renameSync(swapped, join(service.dataDir, 'models', 'original.gguf'));
    const replaced = await service.client.createResponse({ model: 'original', input: 'hi', max_output_tokens: 3 });
    assert.equal(replaced.body.error?.code, 'model_digest_mismatch');

    // A file only touched (same bytes) is hashed again, found the same, and loads.
    copyFileSync(tinyPath(service), join(service.dataDir, 'models', 'touched.gguf'));
    assert.equal((await register(service, { path: 'touched.gguf', id: 'touched' })).status, 201);
    chmodSync(join(service.dataDir, 'models', 'touched.gguf'), 0o600);
    const touched = await service.client.createResponse({ model: 'touched', input: 'hi', max_output_tokens: 3 });
    assert.equal(touched.body.status, 'incomplete');
    assert.equal((await service.client.getModel('touched')).status, 'ready');
  }));

  test('a file swapped while its model loads is not used: the load fails, and the next one hashes it', () => withService({ env: { LMSP_DEBUG_LOAD_DELAY_MS: '2500' } }, async (service) => {
    const path = join(service.dataDir, 'models', 'racing.gguf');
    copyFileSync(tinyPath(service), path);
    assert.equal((await register(service, { path: 'racing.gguf', id: 'racing' })).status, 201);
    const other = join(service.dataDir, 'models', 'other.tmp');
    copyFileSync(tinyPath(service), other);
    const fd = openSync(other, 'r+');
    writeSync(fd, Buffer.from([0x7f]), 0, 1, 200_000);
    closeSync(fd);
    execFileSync('touch', ['-r', path, other]);

    const created = await service.client.createResponse({ model: 'racing', input: 'hi', max_output_tokens: 3, background: true });
    await waitFor(async () => (await service.client.getTask(created.body.task.id)).status === 'loading', { intervalMs: 20, what: 'loading' });
    // After the check before the load (a 470 KB hash), long before the slowed load ends.
    await sleep(700);
    renameSync(other, path);
    const ended = await waitFor(async () => {
      const response = await service.client.getResponse(created.body.id);
      return ['completed', 'incomplete', 'failed'].includes(response.status) ? response : null;
    }, { timeoutMs: 30_000, what: 'the response ends' });
    assert.equal(ended.status, 'failed');
    assert.equal(ended.error?.code, 'model_digest_mismatch');
    assert.match(ended.error!.message, /changed while it loaded/);
    assert.deepEqual(ended.output, [], 'nothing was generated from what was loaded');
    assert.equal((await service.client.getModel('racing')).status, 'ready', 'not marked: what is on disk was not hashed yet');
    // The next use checks the file again: its digest differs now.
    const next = await service.client.createResponse({ model: 'racing', input: 'hi', max_output_tokens: 3 });
    assert.equal(next.body.error?.code, 'model_digest_mismatch');
    assert.equal((await service.client.getModel('racing')).status, 'digest_mismatch');
    const tiny = await service.client.createResponse({ model: 'lmsp-tiny', input: 'hi', max_output_tokens: 3 });
    assert.equal(tiny.body.status, 'incomplete', 'the service goes on');
  }));

  test('a task for a model whose file is gone fails without pushing the loaded model out of memory', () => withService({}, async (service) => {
    assert.equal((await service.client.createResponse({ model: 'lmsp-tiny', input: 'hi', max_output_tokens: 2 })).body.status, 'incomplete');
    assert.equal((await service.client.getModel('lmsp-tiny')).loaded, true);
    copyFileSync(tinyPath(service), join(service.dataDir, 'models', 'gone.gguf'));
    assert.equal((await register(service, { path: 'gone.gguf', id: 'gone' })).status, 201);
    rmSync(join(service.dataDir, 'models', 'gone.gguf'));
    const failed = await service.client.createResponse({ model: 'gone', input: 'hi', max_output_tokens: 2 });
    assert.equal(failed.body.error?.code, 'model_not_found');
    // One model loaded at a time: lmsp-tiny would have made room for a load that never came.
    assert.equal((await service.client.getModel('lmsp-tiny')).loaded, true, 'lmsp-tiny stays loaded');
  }));

  test('a file deleted since it was registered shows missing at once, and ready again when it is back unchanged', () => withService({}, async (service) => {
    const path = join(service.dataDir, 'models', 'fleeting.gguf');
    copyFileSync(tinyPath(service), path);
    assert.equal((await register(service, { path: 'fleeting.gguf', id: 'fleeting' })).status, 201);
    const kept = join(service.dataDir, 'fleeting.kept');
    renameSync(path, kept);
    // No verify and no task in between: reading the model looks at its file.
    assert.equal((await service.client.getModel('fleeting')).status, 'missing');
    const listed = (await (await api(service, '/v1/models')).json()) as { data: ModelObject[] };
    assert.equal(listed.data.find((model) => model.id === 'fleeting')?.status, 'missing');
    assert.equal(listed.data.find((model) => model.id === 'lmsp-tiny')?.status, 'ready');
    // The same file moved back (same size and modification time) is the registered one again.
    renameSync(kept, path);
    assert.equal((await service.client.getModel('fleeting')).status, 'ready');
    // A link in its place is not the registered file.
    rmSync(path);
    symlinkSync(tinyPath(service), path);
    assert.equal((await service.client.getModel('fleeting')).status, 'digest_mismatch');
    // A file of another size than the one hashed cannot hold its bytes: no hash needed to say so.
    rmSync(path);
    copyFileSync(tinyPath(service), path);
    truncateSync(path, 200_000);
    assert.equal((await service.client.getModel('fleeting')).status, 'digest_mismatch');
    assert.equal((await runCli(['models', 'ls', '--json', '--data-dir', service.dataDir])).stdout.includes('"digest_mismatch"'), true, 'lmsp models ls says so too');
  }));

  test('a link planted where a registered file was is never followed: the model no longer matches, and nothing outside is read', { timeout: 60_000 }, () => withService({}, async (service) => {
    const path = join(service.dataDir, 'models', 'swapped.gguf');
    copyFileSync(tinyPath(service), path);
    assert.equal((await register(service, { path: 'swapped.gguf', id: 'swapped' })).status, 201);
    // Outside the models directory: a pipe, which a reader following the link would wait on forever.
    const outside = join(makeDataDir('outside'), 'pipe');
    execFileSync('mkfifo', [outside]);
    rmSync(path);
    symlinkSync(outside, path);
    const answer = await service.client.createResponse({ model: 'swapped', input: 'hi', max_output_tokens: 3 });
    assert.equal(answer.body.status, 'failed');
    assert.equal(answer.body.error?.code, 'model_digest_mismatch');
    assert.doesNotMatch(answer.body.error!.message, /sha256:/, 'no digest of whatever the link leads to');
    const verified = (await (await api(service, '/v1/models/swapped/verify', { method: 'POST' })).json()) as ModelObject;
    assert.equal(verified.status, 'digest_mismatch');
  }));

  test('a link planted at a folder above a registered file is never followed either: no digest of the file it leads to, by a load or a verify', { timeout: 60_000 }, () => withService({}, async (service) => {
    const folder = join(service.dataDir, 'models', 'etc');
    mkdirSync(folder);
    copyFileSync(tinyPath(service), join(folder, 'secret'));
    assert.equal((await register(service, { path: 'etc/secret', id: 'probe' })).status, 201);
    // The folder becomes a link to another holding a file of the same name, as a link to /etc would.
    const elsewhere = makeDataDir('elsewhere');
    writeFileSync(join(elsewhere, 'secret'), 'root:$6$not-for-you\n');
    const outsideDigest = `sha256:${createHash('sha256').update(readFileSync(join(elsewhere, 'secret'))).digest('hex')}`;
    renameSync(folder, `${folder}.old`);
    symlinkSync(elsewhere, folder);
    // Seen at once, as a link at the file itself is, before any load or verify.
    assert.equal((await service.client.getModel('probe')).status, 'digest_mismatch');
    assert.equal((await service.client.listModels()).find((model) => model.id === 'probe')?.status, 'digest_mismatch');
    const answer = await service.client.createResponse({ model: 'probe', input: 'hi', max_output_tokens: 3 });
    assert.equal(answer.body.status, 'failed');
    assert.equal(answer.body.error?.code, 'model_digest_mismatch');
    assert.match(answer.body.error!.message, /behind a link, which is not followed/);
    assert.doesNotMatch(answer.body.error!.message, /sha256:[0-9a-f]{64}/, 'no digest of what the link leads to');
    const verify = await api(service, '/v1/models/probe/verify', { method: 'POST' });
    const verifiedText = await verify.text();
    assert.equal((JSON.parse(verifiedText) as ModelObject).status, 'digest_mismatch');
    assert.ok(!verifiedText.includes(outsideDigest.slice(7)), 'verify shows no digest of it either');
  }));

  test('a data directory moved and linked back from where it was leaves its models ready: the same files, reached through a link the operator made', { timeout: 60_000 }, () => withService({}, async (service) => {
    copyFileSync(tinyPath(service), join(service.dataDir, 'models', 'kept.gguf'));
    assert.equal((await register(service, { path: 'kept.gguf', id: 'kept' })).status, 201);
    await service.stop();
    renameSync(service.dataDir, `${service.dataDir}-moved`);
    symlinkSync(`${service.dataDir}-moved`, service.dataDir);
    const moved = await service.restart();
    for (const model of await moved.client.listModels()) assert.equal(model.status, 'ready', model.id);
    assert.equal((await moved.client.createResponse({ model: 'kept', input: 'hi', max_output_tokens: 3 })).body.status, 'incomplete');
    // Back where it was, for the cleanup after the test.
    await moved.stop();
    rmSync(service.dataDir);
    renameSync(`${service.dataDir}-moved`, service.dataDir);
  }));

  test('a data directory copied elsewhere (a backup restored) serves the model files inside it, not those of the folder it came from', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      copyFileSync(tinyPath(service), join(service.dataDir, 'models', 'kept.gguf'));
      assert.equal((await register(service, { path: 'kept.gguf', id: 'kept' })).status, 201);
      copyFileSync(tinyPath(service), join(service.dataDir, 'models', 'gone.gguf'));
      assert.equal((await register(service, { path: 'gone.gguf', id: 'gone' })).status, 201);
      await service.stop();
      const restored = makeDataDir('restored');
      cpSync(service.dataDir, restored, { recursive: true, preserveTimestamps: true });
      // A file the restored folder lacks is missing there, not taken from the folder it came from.
      rmSync(join(restored, 'models', 'gone.gguf'));
      // The original is gone (moved away): what the restored folder serves must be its own files.
      renameSync(service.dataDir, `${service.dataDir}-away`);
      try {
        const elsewhere = await startService({ dataDir: restored });
        try {
          const models = await elsewhere.client.listModels();
          assert.deepEqual(models.map((model) => model.id).sort(), ['gone', 'kept', 'lmsp-tiny']);
          for (const model of models) {
            assert.equal(model.status, model.id === 'gone' ? 'missing' : 'ready', model.id);
            assert.ok(model.path!.startsWith(`${realpathSync(restored)}/models/`), `${model.id} at ${model.path}`);
          }
          assert.equal((await elsewhere.client.createResponse({ model: 'kept', input: 'hi', max_output_tokens: 3 })).body.status, 'incomplete');
          assert.equal((await elsewhere.client.createResponse({ model: 'lmsp-tiny', input: 'hi', max_output_tokens: 3 })).body.status, 'incomplete');
        } finally {
          await elsewhere.stop();
        }
      } finally {
        renameSync(`${service.dataDir}-away`, service.dataDir);
        rmSync(restored, { recursive: true, force: true });
      }
    }));

  test('DELETE refuses a model an unfinished task uses; the file stays', () => withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
    copyFileSync(tinyPath(service), join(service.dataDir, 'models', 'busy.gguf'));
    await register(service, { path: 'busy.gguf', id: 'busy' });
    const running = await service.client.createResponse({ model: 'busy', input: 'x', background: true, max_output_tokens: 3000 });
    await waitFor(async () => (await service.client.getTask(running.body.task.id)).status === 'running');
    const refused = await api(service, '/v1/models/busy', { method: 'DELETE' });
    assert.equal(refused.status, 409);
    assert.equal(refused.headers.get('x-should-retry'), 'false');
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'model_in_use');
    await service.client.cancelResponse(running.body.id);
    await waitFor(async () => (await service.client.getResponse(running.body.id)).status === 'cancelled');
    assert.equal((await service.client.getModel('busy')).loaded, true);
    // Another id for the same file shows it loaded too; unregistering one leaves the file loaded for the other.
    assert.equal((await register(service, { path: 'busy.gguf', id: 'twin' })).status, 201);
    assert.equal((await service.client.getModel('twin')).loaded, true);
    assert.equal((await api(service, '/v1/models/twin', { method: 'DELETE' })).status, 200);
    assert.equal((await service.client.getModel('busy')).loaded, true);
    assert.equal((await scrape(service.url, service.token)).value('lmsp_models_loaded'), 1);
    assert.equal((await register(service, { path: 'busy.gguf', id: 'twin' })).status, 201);
    assert.equal((await api(service, '/v1/models/busy', { method: 'DELETE' })).status, 200);
    assert.equal((await service.client.getModel('twin')).loaded, true, 'loaded under the id just deleted, still the file of this one');
    assert.equal((await register(service, { path: 'busy.gguf', id: 'busy' })).status, 201);
    assert.equal((await api(service, '/v1/models/twin', { method: 'DELETE' })).status, 200);
    const deleted = await api(service, '/v1/models/busy', { method: 'DELETE' });
    assert.equal(deleted.status, 200);
    assert.deepEqual(await deleted.json(), { id: 'busy', object: 'model', deleted: true });
    assert.ok(existsSync(join(service.dataDir, 'models', 'busy.gguf')));
    // Its memory is given back now, not at keep-alive (5 minutes here).
    assert.equal((await scrape(service.url, service.token)).value('lmsp_models_loaded'), 0);
    const gone = await api(service, '/v1/responses', { method: 'POST', json: { model: 'busy', input: 'x' } });
    assert.equal(gone.status, 404);
    const response = (await service.client.getResponse(running.body.id)) as ResponseObject;
    assert.equal(response.model, 'busy', 'records that used the model stay');
  }));
});
