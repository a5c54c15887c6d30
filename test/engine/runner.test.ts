import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { TaskEvent } from '../../src/api/types.js';
import { writeGgufFile } from '../../src/engine/gguf-writer.js';
import { BENCH_MODEL, buildSyntheticModel, LMSP_TINY } from '../../src/engine/synthetic-model.js';
import { api, childPids, waitFor, withService, type TestService } from '../helpers/service.js';

async function eventTypes(service: TestService, taskId: string): Promise<string[]> {
  return (await service.client.taskEvents(taskId, 0, 1000)).data.map((event: TaskEvent) => event.type);
}

async function loaded(service: TestService): Promise<Record<string, boolean>> {
  return Object.fromEntries((await service.client.listModels()).map((model) => [model.id, model.loaded]));
}

describe('llama.cpp runners (issue: models and real inference)', () => {
  test('a runner that dies mid-task under on_restart fail fails that task with engine_error; the service serves the next one', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
      // The other policies run the task again (test/crash/runner-death.test.ts).
      const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 5000, on_restart: 'fail' });
      await waitFor(async () => ((await service.client.getResponse(created.body.id)).usage?.output_tokens ?? 0) > 3);
      const runners = childPids(service.pid);
      assert.ok(runners.length >= 1, 'a runner process exists');
      for (const pid of runners) process.kill(pid, 'SIGKILL');
      const failed = await waitFor(async () => {
        const response = await service.client.getResponse(created.body.id);
        return response.status === 'failed' ? response : null;
      });
      assert.equal(failed.error?.code, 'engine_error');
      assert.equal(failed.error?.message, 'the engine process exited unexpectedly (signal SIGKILL)');
      assert.ok(failed.output[0]!.content[0]!.text.length > 0, 'the output so far stays');
      const next = await service.client.createResponse({ model: 'lmsp-tiny', input: 'y', max_output_tokens: 5 });
      assert.equal(next.body.status, 'incomplete');
      assert.equal((await fetch(`${service.url}/healthz`)).status, 200);
    }));

  test('the first use of a model shows loading; later uses go straight to running', { timeout: 60_000 }, () => withService({}, async (service) => {
    const first = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
    assert.deepEqual((await eventTypes(service, first.body.task.id)).slice(0, 3), ['response.created', 'response.loading', 'response.in_progress']);
    const second = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
    assert.deepEqual((await eventTypes(service, second.body.task.id)).slice(0, 2), ['response.created', 'response.in_progress']);
    assert.equal((await loaded(service))['lmsp-tiny'], true);
  }));

  test('keep_alive unloads an idle model; max_loaded_models unloads the least recently used one', { timeout: 60_000 }, () =>
    withService({ args: ['--keep-alive', '1500ms', '--max-loaded-models', '1'] }, async (service) => {
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'other.gguf'));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'other.gguf', id: 'other' } })).status, 201);
      await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
      assert.deepEqual(await loaded(service), { 'lmsp-tiny': true, other: false });
      await service.client.createResponse({ model: 'other', input: 'x', max_output_tokens: 2 });
      assert.deepEqual(await loaded(service), { 'lmsp-tiny': false, other: true }, 'one model at a time');
      await waitFor(async () => !(await loaded(service)).other, { timeoutMs: 5000, what: 'keep_alive to unload the model' });
      await waitFor(() => childPids(service.pid).length === 0, { timeoutMs: 5000, what: 'an unloaded model to leave no runner process' });
    }));

  test('two models stay loaded with --max-loaded-models 2 and two slots', { timeout: 60_000 }, () =>
    withService({ args: ['--max-loaded-models', '2', '--parallel', '2'] }, async (service) => {
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'other.gguf'));
      await api(service, '/v1/models', { method: 'POST', json: { path: 'other.gguf', id: 'other' } });
      await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
      await service.client.createResponse({ model: 'other', input: 'x', max_output_tokens: 2 });
      assert.deepEqual(await loaded(service), { 'lmsp-tiny': true, other: true });
      assert.equal(childPids(service.pid).length, 2, 'one runner per loaded model');
    }));

  test('a cancel during a long prompt is honoured at once', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      writeGgufFile(join(service.dataDir, 'models', 'bench.gguf'), buildSyntheticModel(BENCH_MODEL));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'bench.gguf', id: 'bench' } })).status, 201);
      // About 6,000 prompt tokens: several seconds of prompt processing on a small CPU.
      const created = await service.client.createResponse({ model: 'bench', input: 'word '.repeat(1200), background: true, max_output_tokens: 50 });
      await waitFor(async () => (await service.client.getTask(created.body.task.id)).status === 'running', { timeoutMs: 60_000 });
      await new Promise((resolve) => setTimeout(resolve, 700));
      assert.equal(((await service.client.getResponse(created.body.id)).usage?.output_tokens ?? 0), 0, 'still processing the prompt');
      const started = Date.now();
      const cancel = await api(service, `/v1/responses/${created.body.id}/cancel`, { method: 'POST' });
      assert.equal(cancel.status, 202);
      await waitFor(async () => (await service.client.getTask(created.body.task.id)).status === 'cancelled', { timeoutMs: 10_000 });
      const elapsed = Date.now() - started;
      assert.ok(elapsed < 1500, `cancelled ${elapsed} ms after the request`);
      const next = await service.client.createResponse({ model: 'lmsp-tiny', input: 'y', max_output_tokens: 3 });
      assert.equal(next.body.status, 'incomplete', 'the service goes on');
    }));
});

describe('chat templates', () => {
  test("a model's own chat template renders the conversation; without one a plain layout is used", { timeout: 60_000 }, () => withService({}, async (service) => {
    const template = "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    writeGgufFile(join(service.dataDir, 'models', 'templated.gguf'), buildSyntheticModel({ ...LMSP_TINY, name: 'templated', chatTemplate: template }));
    assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'templated.gguf', id: 'templated' } })).status, 201);
    const input = [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'Hello there.' }];
    const plain = await service.client.createResponse({ model: 'lmsp-tiny', input, max_output_tokens: 4 });
    const templated = await service.client.createResponse({ model: 'templated', input, max_output_tokens: 4 });
    assert.equal(templated.body.status, 'incomplete');
    const plainTokens = plain.body.usage!.input_tokens;
    const templatedTokens = templated.body.usage!.input_tokens;
    // "System: Be brief.\nUser: Hello there.\nAssistant:" against the ChatML markers around each message.
    assert.notEqual(templatedTokens, plainTokens);
    assert.ok(templatedTokens > plainTokens, `the template adds its markers (${templatedTokens} vs ${plainTokens} tokens)`);
  }));

  test('a template that refuses the messages (raise_exception): 400 naming messages on Chat Completions, a failed response on Responses', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      // As Gemma's and Mistral's templates refuse a conversation whose roles do not alternate.
      const strict = "{% if messages[0]['role'] == 'assistant' %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        + "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
      writeGgufFile(join(service.dataDir, 'models', 'strict.gguf'), buildSyntheticModel({ ...LMSP_TINY, name: 'strict', chatTemplate: strict }));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'strict.gguf', id: 'strict' } })).status, 201);
      const messages = [{ role: 'assistant', content: 'Hello.' }, { role: 'user', content: 'Hi.' }];
      const chat = await api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'strict', messages, max_tokens: 3 } });
      const body = (await chat.json()) as { error: { code: string; param: string | null; message: string } };
      assert.equal(chat.status, 400, JSON.stringify(body));
      assert.equal(body.error.code, 'invalid_request');
      assert.equal(body.error.param, 'messages');
      assert.match(body.error.message, /chat template refused these messages: .*roles must alternate user\/assistant\/user/);
      assert.ok(chat.headers.get('lmsp-task-id'), 'the task that failed is named');
      const response = await service.client.createResponse({ model: 'strict', input: messages as never, max_output_tokens: 3 });
      assert.equal(response.body.status, 'failed');
      assert.equal(response.body.error?.code, 'engine_error');
      // The same model answers a conversation its template accepts.
      const fine = await api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'strict', messages: messages.slice(1), max_tokens: 3 } });
      assert.equal(fine.status, 200);
    }));

  test('a template that never ends fails its request after the render deadline, and the service goes on (LMSP 5)', { timeout: 90_000 }, () =>
    withService({ env: { LMSP_DEBUG_RENDER_DEADLINE_MS: '3000' } }, async (service) => {
      const endless = '{% for a in range(100000) %}{% for b in range(100000) %}{{ "xxxxxxxxxxxxxxxx" }}{% endfor %}{% endfor %}';
      writeGgufFile(join(service.dataDir, 'models', 'endless.gguf'), buildSyntheticModel({ ...LMSP_TINY, name: 'endless', chatTemplate: endless }));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'endless.gguf', id: 'endless' } })).status, 201);
      const started = Date.now();
      const failed = await service.client.createResponse({ model: 'endless', input: 'hi', max_output_tokens: 3 });
      assert.equal(failed.body.status, 'failed');
      assert.equal(failed.body.error?.code, 'engine_error');
      assert.match(failed.body.error!.message, /chat template did not render the prompt within 3 s/);
      assert.ok(Date.now() - started < 30_000, `failed after ${Date.now() - started} ms`);
      // An input long enough to be counted by the tokenizer first: the count gives up too, and so does the task.
      const long = await service.client.createResponse({ model: 'endless', input: 'word '.repeat(4000), max_output_tokens: 13_000 });
      assert.equal(long.body.status, 'failed');
      assert.equal(long.body.error?.code, 'engine_error');
      // The tokenizer and the slot are free again for everyone else: a count answers (a 400 that
      // names the tokens), and a generation runs.
      const counted = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'word '.repeat(4000), max_output_tokens: 12_000 } });
      assert.equal(counted.status, 400);
      assert.match(((await counted.json()) as { error: { message: string } }).error.message, /^The input \(\d+ tokens\)/);
      const next = await service.client.createResponse({ model: 'lmsp-tiny', input: 'hi', max_output_tokens: 3 });
      assert.equal(next.body.status, 'incomplete');
    }));
});
