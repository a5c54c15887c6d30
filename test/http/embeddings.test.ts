import assert from 'node:assert/strict';
import { copyFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import type { EmbeddingList } from '../../src/api/embeddings.js';
import type { ErrorBody } from '../../src/api/types.js';
import { writeGgufFile, type GgufValue } from '../../src/engine/gguf-writer.js';
import { LMSP_TINY, SYNTHETIC_SPACE_TOKEN_ID, buildSyntheticModel, syntheticByteTokenId } from '../../src/engine/synthetic-model.js';
import { api, pairClient, waitFor, withService, type TestService } from '../helpers/service.js';

const WIDTH = 64; // lmsp-tiny's embedding size

function norm(vector: readonly number[]): number {
  return Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
}

function vectors(list: EmbeddingList): number[][] {
  return list.data.map((item) => item.embedding as number[]);
}

/** The ids lmsp-tiny's tokenizer gives a text: `▁` first, then one byte token per character, spaces as `▁`. */
function tokenIds(text: string): number[] {
  return [SYNTHETIC_SPACE_TOKEN_ID, ...[...text].map((char) => (char === ' ' ? SYNTHETIC_SPACE_TOKEN_ID : syntheticByteTokenId(char.charCodeAt(0))))];
}

async function embed(service: TestService, body: object, headers: Record<string, string> = {}): Promise<EmbeddingList> {
  const response = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'lmsp-tiny', ...body }, headers });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return JSON.parse(text) as EmbeddingList;
}

async function refused(service: TestService, body: object, status: number, code: string, param: string | null): Promise<void> {
  const response = await api(service, '/v1/embeddings', { method: 'POST', json: body });
  const text = await response.text();
  assert.equal(response.status, status, `${JSON.stringify(body).slice(0, 120)}: ${text}`);
  const { error } = JSON.parse(text) as ErrorBody;
  assert.equal(error.code, code, text);
  assert.equal(error.param, param, text);
  assert.equal(typeof error.message, 'string');
  assert.ok(error.message.length > 0);
  // The message names the input as its param does: `input` when it was sent alone.
  if (code === 'context_length_exceeded') assert.ok(error.message.startsWith(`${param} has `), text);
}

function countRows(service: TestService, table: string): number {
  const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'), { readonly: true });
  try {
    return (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('Embeddings API (LMSP section 14)', () => {
  test('shape, L2 norm, determinism, batches equal to single inputs, usage; answered directly, not as a task', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const one = await embed(service, { input: 'The cat sat.', user: 'someone' });
      assert.deepEqual(Object.keys(one).sort(), ['data', 'model', 'object', 'usage']);
      assert.equal(one.object, 'list');
      assert.equal(one.model, 'lmsp-tiny');
      assert.equal(one.data.length, 1);
      assert.deepEqual(Object.keys(one.data[0]!).sort(), ['embedding', 'index', 'object']);
      assert.equal(one.data[0]!.object, 'embedding');
      assert.equal(one.data[0]!.index, 0);
      const [vector] = vectors(one);
      assert.equal(vector!.length, WIDTH);
      assert.ok(vector!.every((value) => Number.isFinite(value)));
      assert.ok(Math.abs(norm(vector!) - 1) < 1e-6, `norm ${norm(vector!)}`);
      // BOS, then `▁` and one token per character.
      assert.deepEqual(one.usage, { prompt_tokens: 2 + 'The cat sat.'.length, total_tokens: 2 + 'The cat sat.'.length });

      const again = await embed(service, { input: 'The cat sat.' });
      assert.deepEqual(vectors(again), vectors(one), 'the same input gives the same numbers');

      const inputs = ['The cat sat.', 'A dog ran far away.', 'The cat sat.', 'Zebra'];
      const batch = await embed(service, { input: inputs });
      assert.deepEqual(batch.data.map((item) => item.index), [0, 1, 2, 3]);
      assert.deepEqual(batch.data[0]!.embedding, vector, 'an input in a batch equals the same input alone');
      assert.deepEqual(batch.data[2]!.embedding, vector);
      assert.notDeepEqual(batch.data[1]!.embedding, vector, 'another input gives another vector');
      for (const [index, input] of inputs.entries()) {
        assert.deepEqual(vectors(await embed(service, { input })), [batch.data[index]!.embedding], `input ${index} alone`);
      }
      const tokens = inputs.reduce((sum, input) => sum + 2 + input.length, 0);
      assert.deepEqual(batch.usage, { prompt_tokens: tokens, total_tokens: tokens });

      const tasks = await (await api(service, '/v1/tasks')).json() as { data: unknown[] };
      assert.deepEqual(tasks.data, [], 'no task was made');
      assert.equal(countRows(service, 'idempotency_keys'), 0, 'nothing is written without an Idempotency-Key');
    }));

  test('dimensions truncate and renormalise; base64 decodes to the float numbers; token-id inputs equal their text', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const text = 'hi there';
      const [full] = vectors(await embed(service, { input: text }));
      const short = await embed(service, { input: text, dimensions: 8 });
      const [vector] = vectors(short);
      assert.equal(vector!.length, 8);
      assert.ok(Math.abs(norm(vector!) - 1) < 1e-6);
      const prefix = full!.slice(0, 8);
      prefix.forEach((value, index) => assert.ok(Math.abs(value / norm(prefix) - vector![index]!) < 1e-6, `dimension ${index}`));
      assert.deepEqual(vectors(await embed(service, { input: text, dimensions: WIDTH })), [full], 'the full width is the plain vector');
      assert.deepEqual(vectors(await embed(service, { input: text, dimensions: null, encoding_format: 'float' })), [full]);

      const inputs = [text, 'another input', 'x'];
      const floats = await embed(service, { input: inputs });
      const base64 = await embed(service, { input: inputs, encoding_format: 'base64' });
      assert.deepEqual(base64.usage, floats.usage);
      for (const [index, item] of base64.data.entries()) {
        assert.equal(typeof item.embedding, 'string');
        const bytes = Buffer.from(item.embedding as string, 'base64');
        assert.equal(bytes.length, WIDTH * 4, 'float32 each');
        const decoded = Array.from({ length: WIDTH }, (_, at) => bytes.readFloatLE(at * 4));
        assert.deepEqual(decoded, floats.data[index]!.embedding, `input ${index}: the same numbers`);
      }
      const shortBase64 = await embed(service, { input: text, dimensions: 8, encoding_format: 'base64' });
      assert.equal(Buffer.from(shortBase64.data[0]!.embedding as string, 'base64').length, 32);

      const ids = tokenIds(text);
      const fromIds = await embed(service, { input: ids });
      assert.deepEqual(vectors(fromIds), [full], 'int[] is one input, the text it spells');
      assert.deepEqual(fromIds.usage, { prompt_tokens: ids.length + 1, total_tokens: ids.length + 1 }, 'BOS added');
      const fromIdLists = await embed(service, { input: [ids, tokenIds('x')] });
      assert.deepEqual(vectors(fromIdLists), [full, vectors(floats)[2]], 'int[][] is a batch of inputs');
    }));

  test('every refusal with its code and param', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      const model = 'lmsp-tiny';
      await refused(service, { model: 'no-such-model', input: 'a' }, 404, 'model_not_found', 'model');
      await refused(service, { input: 'a' }, 400, 'invalid_request', 'model');
      await refused(service, { model }, 400, 'invalid_request', 'input');
      await refused(service, { model, input: 5 }, 400, 'invalid_request', 'input');
      // null is neither of the two types allowed, and the message names both.
      const nothing = await api(service, '/v1/embeddings', { method: 'POST', json: { model, input: null } });
      assert.equal(nothing.status, 400);
      assert.match(((await nothing.json()) as { error: { message: string } }).error.message, /must be a string or an array\./);
      await refused(service, { model, input: '' }, 400, 'invalid_request', 'input');
      await refused(service, { model, input: [] }, 400, 'invalid_request', 'input');
      await refused(service, { model, input: ['a', ''] }, 400, 'invalid_request', 'input[1]');
      await refused(service, { model, input: ['a', 3] }, 400, 'invalid_request', 'input[1]');
      await refused(service, { model, input: [{ text: 'a' }] }, 400, 'invalid_request', 'input[0]');
      await refused(service, { model, input: [[100, 101], []] }, 400, 'invalid_request', 'input[1]');
      await refused(service, { model, input: [[100, 101], [100, -1]] }, 400, 'invalid_request', 'input[1][1]');
      await refused(service, { model, input: [[100], 'a'] }, 400, 'invalid_request', 'input[1]');
      await refused(service, { model, input: [100, 1.5] }, 400, 'invalid_request', 'input[1]');
      // A token id outside the vocabulary is named as one that is not an integer: the element itself.
      await refused(service, { model, input: [100, 100_000] }, 400, 'invalid_request', 'input[1]');
      await refused(service, { model, input: [[100], [100, 100_000]] }, 400, 'invalid_request', 'input[1][1]');
      await refused(service, { model, input: Array.from({ length: 2049 }, () => 'a') }, 400, 'invalid_request', 'input');
      await refused(service, { model, input: ['fine', 'x'.repeat(16_384)] }, 400, 'context_length_exceeded', 'input[1]');
      await refused(service, { model, input: 'x'.repeat(16_384) }, 400, 'context_length_exceeded', 'input');
      await refused(service, { model, input: 'a', dimensions: WIDTH + 1 }, 400, 'invalid_request', 'dimensions');
      await refused(service, { model, input: 'a', dimensions: 0 }, 400, 'invalid_request', 'dimensions');
      await refused(service, { model, input: 'a', dimensions: '8' }, 400, 'invalid_request', 'dimensions');
      await refused(service, { model, input: 'a', encoding_format: 'hex' }, 400, 'invalid_request', 'encoding_format');
      await refused(service, { model, input: 'a', user: 7 }, 400, 'invalid_request', 'user');

      // The limits themselves are allowed.
      assert.equal((await embed(service, { input: Array.from({ length: 2048 }, (_, index) => `n${index % 7}`) })).data.length, 2048);
      assert.equal((await embed(service, { input: 'x'.repeat(16_380) })).usage.prompt_tokens, 16_382);

      const anonymous = await fetch(`${service.url}/v1/embeddings`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, input: 'a' }),
      });
      assert.equal(anonymous.status, 401);
      const reader = await pairClient(service, ['models:read'], 'reader');
      const unscoped = await api({ url: service.url, token: reader.token }, '/v1/embeddings', { method: 'POST', json: { model, input: 'a' } });
      assert.equal(unscoped.status, 403);
      assert.equal(((await unscoped.json()) as ErrorBody).error.code, 'insufficient_scope');
      const user = await pairClient(service, ['responses'], 'user');
      const scoped = await api({ url: service.url, token: user.token }, '/v1/embeddings', { method: 'POST', json: { model, input: 'a' } });
      assert.equal(scoped.status, 200, 'the responses scope is enough');
    }));

  test('an embedding waiting for a slot goes ahead of queued generations, not behind all of them', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' }, args: ['--parallel', '1', '--max-loaded-models', '1'] }, async (service) => {
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'other.gguf'));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'other.gguf', id: 'other' } })).status, 201);
      // One generation holds the only slot, and three more wait behind it.
      const tasks: string[] = [];
      for (let i = 0; i < 4; i++) tasks.push((await service.client.createResponse({ model: 'lmsp-tiny', input: `g${i}`, max_output_tokens: 80, background: true })).body.task.id);
      await waitFor(async () => (await service.client.getTask(tasks[0]!)).status === 'running' || undefined);
      const answer = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'other', input: 'hello' } });
      assert.equal(answer.status, 200);
      // It took the slot when the running generation gave it back: the last queued one has not run.
      const last = await service.client.getTask(tasks[3]!);
      assert.equal(last.started_at, null, `the last queued generation is still waiting (${last.status})`);
    }));

  test('with two slots and one model loaded at a time, an embedding of another model is not starved by generations that keep the loaded one busy', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' }, args: ['--parallel', '2', '--parallel-mode', 'processes', '--max-loaded-models', '1'] }, async (service) => {
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'other.gguf'));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'other.gguf', id: 'other' } })).status, 201);
      // Each freed slot would go to the next lmsp-tiny task, so lmsp-tiny would never idle, and
      // `other` could not load until the whole queue had run.
      const tasks: string[] = [];
      for (let i = 0; i < 8; i++) tasks.push((await service.client.createResponse({ model: 'lmsp-tiny', input: `g${i}`, max_output_tokens: 60, background: true })).body.task.id);
      await waitFor(async () => (await service.client.getTask(tasks[1]!)).status === 'running' || undefined);
      const answer = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'other', input: 'hello' } });
      assert.equal(answer.status, 200);
      const last = await service.client.getTask(tasks[7]!);
      assert.equal(last.started_at, null, `the last queued generation is still waiting (${last.status})`);
    }));

  test('embeddings that keep coming take turns with a queued generation: they cannot hold it back for as long as they come', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' }, args: ['--parallel', '1', '--max-loaded-models', '1'] }, async (service) => {
      for (const id of ['a', 'b']) {
        copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', `${id}.gguf`));
        assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: `${id}.gguf`, id } })).status, 201);
      }
      const first = (await service.client.createResponse({ model: 'lmsp-tiny', input: 'g', max_output_tokens: 150, background: true })).body.task.id;
      await waitFor(async () => (await service.client.getTask(first)).status === 'running' || undefined);
      // Two clients that embed without a pause, each with its own model: one of them is always
      // waiting for the only slot while the other has it.
      let done = 0;
      let stop = false;
      const loop = (model: string) => (async () => {
        for (let i = 0; i < 8 && !stop; i++) {
          const answer = await api(service, '/v1/embeddings', { method: 'POST', json: { model, input: `e${i}` } });
          assert.equal(answer.status, 200);
          done += 1;
        }
      })();
      const loops = [loop('a'), loop('b')];
      await waitFor(() => done >= 2 || undefined, { what: 'the embeddings to begin' });
      const queued = (await service.client.createResponse({ model: 'lmsp-tiny', input: 'q', max_output_tokens: 5, background: true })).body.task.id;
      await waitFor(async () => (await service.client.getTask(queued)).started_at !== null || undefined, { timeoutMs: 60_000, what: 'the queued generation to start' });
      const before = done;
      stop = true;
      await Promise.all(loops);
      assert.ok(before < 8, `the generation started after ${before} of the embeddings, not after all of them`);
    }));

  test('an embedding of a model a generation is loading runs once the load ends, beside the generation, not after it', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20', LMSP_DEBUG_LOAD_DELAY_MS: '1000' }, args: ['--parallel', '1', '--parallel-mode', 'processes'] }, async (service) => {
      const task = (await service.client.createResponse({ model: 'lmsp-tiny', input: 'g', max_output_tokens: 400, background: true })).body.task.id;
      await waitFor(async () => (await service.client.getTask(task)).status === 'loading' || undefined);
      const answer = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'lmsp-tiny', input: 'hello' } });
      assert.equal(answer.status, 200);
      assert.equal((await service.client.getTask(task)).status, 'running', 'answered while the generation runs (400 tokens, 8 s)');
      await api(service, `/v1/tasks/${task}/cancel`, { method: 'POST' });
    }));

  test('a model whose file changed is a 409 model_digest_mismatch naming model, with x-should-retry: false (the file is at fault: no 5xx, no retry)', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const path = join(service.dataDir, 'models', 'changed.gguf');
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), path);
      const registered = await api(service, '/v1/models', { method: 'POST', json: { path: 'changed.gguf', id: 'changed' } });
      assert.equal(registered.status, 201, await registered.text());
      writeGgufFile(path, buildSyntheticModel({ ...LMSP_TINY, seed: 3 }));
      const response = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'changed', input: 'a' } });
      const text = await response.text();
      assert.equal(response.status, 409, text);
      const { error } = JSON.parse(text) as ErrorBody;
      assert.deepEqual([error.code, error.param], ['model_digest_mismatch', 'model']);
      assert.match(error.message, /^model_digest_mismatch: /);
      assert.equal(response.headers.get('x-should-retry'), 'false', 'a retry cannot fix a changed file');
      // The same for a chat completion of it, whose task failed the same way.
      const chat = await api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'changed', messages: [{ role: 'user', content: 'a' }], max_tokens: 2 } });
      const chatText = await chat.text();
      assert.equal(chat.status, 409, chatText);
      assert.deepEqual([(JSON.parse(chatText) as ErrorBody).error.code, (JSON.parse(chatText) as ErrorBody).error.param], ['model_digest_mismatch', 'model']);
      assert.ok(chat.headers.get('lmsp-task-id'));
      // A file that passes validation but that llama.cpp refuses: 422 model_load_failed, for both.
      const unloadable = join(service.dataDir, 'models', 'unloadable.gguf');
      // Sound as a GGUF file, but a llama model without its output norm, which llama.cpp will not load.
      const whole = buildSyntheticModel({ ...LMSP_TINY, seed: 4 });
      writeGgufFile(unloadable, { ...whole, tensors: whole.tensors.filter((tensor) => tensor.name !== 'output_norm.weight') });
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'unloadable.gguf', id: 'unloadable' } })).status, 201);
      for (const [path, body] of [['/v1/embeddings', { model: 'unloadable', input: 'a' }],
        ['/v1/chat/completions', { model: 'unloadable', messages: [{ role: 'user', content: 'a' }], max_tokens: 2 }]] as const) {
        const refused = await api(service, path, { method: 'POST', json: body });
        const refusedText = await refused.text();
        assert.equal(refused.status, 422, `${path}: ${refusedText}`);
        assert.deepEqual([(JSON.parse(refusedText) as ErrorBody).error.code, (JSON.parse(refusedText) as ErrorBody).error.param], ['model_load_failed', 'model']);
        // Why, in llama.cpp's words, not only node-llama-cpp's "Failed to load model".
        assert.match((JSON.parse(refusedText) as ErrorBody).error.message, /\(llama\.cpp: .*output_norm\.weight/, refusedText);
        assert.equal(refused.headers.get('x-should-retry'), 'false');
      }
    }));

  test('a model that loads but breaks the engine is a 500 engine_error, never a 200 with no vector nor an internal_error', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const tiny = buildSyntheticModel({ ...LMSP_TINY, seed: 5 });
      const variant = (id: string, metadata: Array<readonly [string, GgufValue]>) => {
        const keys = new Set(metadata.map(([key]) => key));
        writeGgufFile(join(service.dataDir, 'models', `${id}.gguf`), { ...tiny, metadata: [...tiny.metadata.filter(([key]) => !keys.has(key)), ...metadata] });
        return api(service, '/v1/models', { method: 'POST', json: { path: `${id}.gguf`, id } });
      };
      // A BPE tokenizer with one merge and none of the text's pieces: the text becomes no token
      // the model can embed, and llama.cpp gives an empty vector.
      assert.equal((await variant('no-vector', [['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
        ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', values: ['a b'] }]])).status, 201);
      // A NaN norm epsilon: llama.cpp loads it, then aborts while computing.
      assert.equal((await variant('nan-epsilon', [['llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: NaN }]])).status, 201);
      // Token embeddings of zeros: every vector is zeros, which has no direction to normalise.
      const zeros = { ...tiny, tensors: tiny.tensors.map((tensor) => tensor.name === 'token_embd.weight' ? { ...tensor, values: () => new Float32Array(tensor.values().length) } : tensor) };
      writeGgufFile(join(service.dataDir, 'models', 'zero-vector.gguf'), zeros);
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'zero-vector.gguf', id: 'zero-vector' } })).status, 201);
      for (const [model, message] of [['no-vector', /no usable embedding for input\[0\]/], ['nan-epsilon', /^engine_error: /], ['zero-vector', /no usable embedding for input\[0\] \(its first 64 values are all 0/]] as const) {
        const response = await api(service, '/v1/embeddings', { method: 'POST', json: { model, input: 'hello' } });
        const text = await response.text();
        assert.equal(response.status, 500, `${model}: ${text}`);
        const { error } = JSON.parse(text) as ErrorBody;
        assert.deepEqual([error.type, error.code], ['server_error', 'engine_error'], `${model}: ${text}`);
        assert.match(error.message, message);
        assert.equal(response.headers.get('x-should-retry'), 'false', 'the same file would fail again');
        // The warning in the log names the request that the answer names.
        const requestId = response.headers.get('x-request-id');
        assert.match(requestId ?? '', /^req_[0-9A-Za-z]{32}$/);
        const warned = await waitFor(() => {
          const lines = service.output().split('\n').filter((line) => line.includes(requestId!));
          return lines.length > 0 ? lines : null;
        }, { what: `the warning about ${model}'s request in the log` });
        assert.equal(warned.length, 1, warned.join('\n'));
        assert.equal((JSON.parse(warned[0]!) as { msg: string }).msg, 'the engine failed on this request');
      }
      // The service and its other models are unharmed.
      const fine = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'lmsp-tiny', input: 'hello' } });
      assert.equal(((await fine.json()) as EmbeddingList).data[0]!.embedding.length, 64);
    }));

  test('a model file swapped while an embedding loads it is not used: 409 model_digest_mismatch, nothing computed from it', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_LOAD_DELAY_MS: '2500' } }, async (service) => {
      const path = join(service.dataDir, 'models', 'racing.gguf');
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), path);
      const registered = await api(service, '/v1/models', { method: 'POST', json: { path: 'racing.gguf', id: 'racing' } });
      assert.equal(registered.status, 201, await registered.text());
      const other = join(service.dataDir, 'models', 'other.tmp');
      writeGgufFile(other, buildSyntheticModel({ ...LMSP_TINY, seed: 3 }));
      const pending = api(service, '/v1/embeddings', { method: 'POST', json: { model: 'racing', input: 'a' } });
      // After the check before the load (a 470 KB hash), long before the slowed load ends.
      await new Promise((resolve) => setTimeout(resolve, 700));
      renameSync(other, path);
      const response = await pending;
      const text = await response.text();
      assert.equal(response.status, 409, text);
      assert.match((JSON.parse(text) as ErrorBody).error.message, /^model_digest_mismatch: .*changed while it loaded/);
      assert.equal(response.headers.get('x-should-retry'), 'false');
    }));

  test('Idempotency-Key: the same request answers the same body as a replay; another body, or another file under the model id, gets 422; a bad key 400', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const body = { model: 'lmsp-tiny', input: ['one', 'two'], dimensions: 16 };
      const first = await api(service, '/v1/embeddings', { method: 'POST', json: body, headers: { 'idempotency-key': 'embed-1' } });
      assert.equal(first.status, 200);
      assert.equal(first.headers.get('idempotent-replayed'), null);
      const firstBody = await first.json();
      assert.equal(countRows(service, 'idempotency_keys'), 1);
      const again = await api(service, '/v1/embeddings', { method: 'POST', json: body, headers: { 'idempotency-key': 'embed-1' } });
      assert.equal(again.status, 200);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(await again.json(), firstBody);

      const other = await api(service, '/v1/embeddings', { method: 'POST', json: { ...body, dimensions: 8 }, headers: { 'idempotency-key': 'embed-1' } });
      assert.equal(other.status, 422);
      assert.equal(((await other.json()) as ErrorBody).error.code, 'idempotency_key_reused');
      const bad = await api(service, '/v1/embeddings', { method: 'POST', json: body, headers: { 'idempotency-key': 'bad key' } });
      assert.equal(bad.status, 400);
      const badBody = (await bad.json()) as ErrorBody;
      assert.equal(badBody.error.code, 'invalid_idempotency_key');
      assert.equal(badBody.error.param, 'Idempotency-Key');
      const refusedWithKey = await api(service, '/v1/embeddings', { method: 'POST', json: { ...body, input: '' }, headers: { 'idempotency-key': 'embed-2' } });
      assert.equal(refusedWithKey.status, 400);
      assert.equal(countRows(service, 'idempotency_keys'), 1, 'a refused request records nothing');

      // The same id, another file: the first answer cannot be given again.
      const register = async (seed: number) => {
        await api(service, '/v1/models/other', { method: 'DELETE' });
        writeGgufFile(join(service.dataDir, 'models', `other-${seed}.gguf`), buildSyntheticModel({ ...LMSP_TINY, seed }));
        const registered = await api(service, '/v1/models', { method: 'POST', json: { path: `other-${seed}.gguf`, id: 'other' } });
        assert.equal(registered.status, 201, await registered.text());
      };
      await register(1);
      const onOther = { ...body, model: 'other' };
      const before = await api(service, '/v1/embeddings', { method: 'POST', json: onOther, headers: { 'idempotency-key': 'embed-3' } });
      assert.equal(before.status, 200);
      await register(2);
      const after = await api(service, '/v1/embeddings', { method: 'POST', json: onOther, headers: { 'idempotency-key': 'embed-3' } });
      assert.equal(after.status, 422);
      assert.equal(((await after.json()) as ErrorBody).error.code, 'idempotency_key_reused');
      const fresh = await api(service, '/v1/embeddings', { method: 'POST', json: onOther, headers: { 'idempotency-key': 'embed-4' } });
      assert.equal(fresh.status, 200);
      assert.notDeepEqual(await fresh.json(), await before.json(), 'another file, other vectors');
    }));
});
