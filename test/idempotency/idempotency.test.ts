import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import type { ModelObject, ResponseObject, TaskObject } from '../../src/api/types.js';
import { api, pairClient, waitFor, withService, type TestService } from '../helpers/service.js';
import { collectSse } from '../helpers/sse.js';

function create(service: Pick<TestService, 'url' | 'token'>, key: string | null, body: object): Promise<Response> {
  return api(service, '/v1/responses', { method: 'POST', json: body, headers: key === null ? {} : { 'idempotency-key': key } });
}

async function taskCount(service: TestService): Promise<number> {
  return (await service.client.listTasks({ limit: 1000 })).data.length;
}

describe('Idempotency-Key (LMSP section 8)', () => {
  test('a replay returns the stored status and body, marked, with no second task; another body is 422', { timeout: 60_000 }, () => withService({}, async (service) => {
    const body = { model: 'lmsp-tiny', input: 'once', background: true, max_output_tokens: 3 };
    const first = await create(service, 'key-1', body);
    assert.equal(first.status, 202);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const firstBody = await first.text();
    const again = await create(service, 'key-1', { max_output_tokens: 3, background: true, input: 'once', model: 'lmsp-tiny' });
    assert.equal(again.status, 202, 'same key, same body (keys in another order)');
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.headers.get('location'), first.headers.get('location'));
    assert.equal(await again.text(), firstBody);
    assert.equal(await taskCount(service), 1);
    const other = await create(service, 'key-1', { ...body, input: 'twice' });
    assert.equal(other.status, 422);
    assert.equal(((await other.json()) as { error: { code: string } }).error.code, 'idempotency_key_reused');
    assert.equal(await taskCount(service), 1);
  }));

  test('keys are checked: 1 to 255 visible ASCII characters', { timeout: 60_000 }, () => withService({}, async (service) => {
    for (const key of ['', ' ', 'a'.repeat(256), 'with space', 'tab\tkey', 'é']) {
      const response = await create(service, key, { model: 'lmsp-tiny', input: 'x', background: true }).catch(() => null);
      if (!response) continue; // fetch itself refuses some header values
      assert.equal(response.status, 400, JSON.stringify(key));
      assert.equal(((await response.json()) as { error: { code: string } }).error.code, 'invalid_idempotency_key');
    }
    assert.equal((await create(service, 'a'.repeat(255), { model: 'lmsp-tiny', input: 'x', background: true })).status, 202);
    assert.equal((await create(service, '~!@#$%^&*()_+{}|:"<>?', { model: 'lmsp-tiny', input: 'x', background: true })).status, 202);
    assert.equal(await taskCount(service), 2);
  }));

  test('keys are scoped per client', { timeout: 60_000 }, () => withService({}, async (service) => {
    const alice = await pairClient(service, ['responses'], 'alice');
    const bob = await pairClient(service, ['responses'], 'bob');
    const body = { model: 'lmsp-tiny', input: 'shared key', background: true, max_output_tokens: 2 };
    const a = (await (await create({ url: service.url, token: alice.token }, 'same', body)).json()) as ResponseObject;
    const b = (await (await create({ url: service.url, token: bob.token }, 'same', body)).json()) as ResponseObject;
    assert.notEqual(a.id, b.id);
  }));

  test('many concurrent requests with one key make exactly one task', { timeout: 60_000 }, () => withService({}, async (service) => {
    const body = { model: 'lmsp-tiny', input: 'together', background: true, max_output_tokens: 2 };
    const answers = await Promise.all(Array.from({ length: 30 }, () => create(service, 'together', body)));
    const ids = new Set<string>();
    for (const answer of answers) {
      assert.equal(answer.status, 202);
      ids.add(((await answer.json()) as ResponseObject).id);
    }
    assert.equal(ids.size, 1);
    assert.equal(answers.filter((answer) => answer.headers.get('idempotent-replayed') === 'true').length, 29);
    assert.equal(await taskCount(service), 1);
  }));

  test('a plain create still running answers 409 idempotency_key_in_flight, then replays its 200', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' } }, async (service) => {
      const body = { model: 'lmsp-tiny', input: 'slow', max_output_tokens: 100 };
      const first = create(service, 'plain', body);
      await waitFor(async () => (await service.client.listTasks({ status: ['running'] })).data.length === 1);
      const during = await create(service, 'plain', body);
      assert.equal(during.status, 409);
      assert.equal(((await during.json()) as { error: { code: string } }).error.code, 'idempotency_key_in_flight');
      assert.equal(during.headers.get('x-should-retry'), null, 'a retry later gets the answer, so retrying is allowed');
      const original = await first;
      assert.equal(original.status, 200);
      const originalText = await original.text();
      const replay = await create(service, 'plain', body);
      assert.equal(replay.status, 200);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.equal(await replay.text(), originalText);
      assert.equal(await taskCount(service), 1);
    }));

  test('a replayed streaming create replays the task events from the start', { timeout: 60_000 }, () => withService({}, async (service) => {
    const body = { model: 'lmsp-tiny', input: 'stream me', stream: true, max_output_tokens: 10 };
    const original = await create(service, 'stream-key', body);
    const location = original.headers.get('location');
    assert.match(location ?? '', /^\/v1\/responses\/resp_/);
    const first = await collectSse(original);
    const replayed = await create(service, 'stream-key', body);
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true');
    assert.equal(replayed.headers.get('location'), location, 'the replay has the Location of the first answer');
    const second = await collectSse(replayed);
    assert.deepEqual(second.map((frame) => frame.data), first.map((frame) => frame.data));
    assert.equal(await taskCount(service), 1);
  }));

  test('a streaming create is settled before its stream ends: a retry right after is a replay, a store: false response is gone', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      for (let round = 0; round < 12; round++) {
        const body = { model: 'lmsp-tiny', input: 'then at once', stream: true, max_output_tokens: 2, store: round % 2 === 0 };
        const first = await collectSse(await create(service, `at-once-${round}`, body));
        const responseId = (JSON.parse(first[0]!.data) as { response: ResponseObject }).response.id;
        const retried = await create(service, `at-once-${round}`, body);
        assert.equal(retried.status, 200, `round ${round}: ${retried.status === 200 ? '' : await retried.text()}`);
        assert.equal(retried.headers.get('idempotent-replayed'), 'true');
        assert.deepEqual((await collectSse(retried)).map((frame) => frame.data), first.map((frame) => frame.data));
        if (!body.store) assert.equal((await api(service, `/v1/responses/${responseId}`)).status, 404, `round ${round}: store: false is deleted once it ends`);
      }
    }));

  test('a replayed streaming create carries the Location of the first answer', { timeout: 60_000 }, () => withService({}, async (service) => {
    for (const mode of [{}, { store: false }, { background: true }]) {
      const key = `located-${JSON.stringify(mode)}`;
      const body = { model: 'lmsp-tiny', input: 'where is it', stream: true, max_output_tokens: 2, ...mode };
      const first = await create(service, key, body);
      const location = first.headers.get('location');
      assert.match(location ?? '', /^\/v1\/responses\/resp_/);
      await collectSse(first);
      const replay = await create(service, key, body);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.equal(replay.headers.get('location'), location, JSON.stringify(mode));
      await collectSse(replay);
    }
  }));

  test('cancel with a key: the replay answers as the first time, with no new effect', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' } }, async (service) => {
      const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 3000 });
      await waitFor(async () => (await service.client.getTask(created.body.task.id)).status === 'running');
      const cancel = () => api(service, `/v1/tasks/${created.body.task.id}/cancel`, { method: 'POST', headers: { 'idempotency-key': 'stop-it' } });
      const first = await cancel();
      assert.equal(first.status, 202);
      const firstBody = (await first.json()) as TaskObject;
      await waitFor(async () => (await service.client.getTask(created.body.task.id)).status === 'cancelled');
      const replay = await cancel();
      assert.equal(replay.status, 202, 'the stored status, not 200 for the now-cancelled task');
      assert.deepEqual(await replay.json(), firstBody);
    }));

  test('POST /v1/models and /v1/pairing-codes replay too', { timeout: 60_000 }, () => withService({}, async (service) => {
    const { copyFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'copy.gguf'));
    const register = () => api(service, '/v1/models', { method: 'POST', json: { path: 'copy.gguf', id: 'copy' }, headers: { 'idempotency-key': 'reg' } });
    const first = await register();
    assert.equal(first.status, 201);
    const second = await register();
    assert.equal(second.status, 201, 'not a 400 for an id already taken');
    assert.equal(second.headers.get('idempotent-replayed'), 'true');
    assert.equal(((await second.json()) as ModelObject).digest, ((await first.json()) as ModelObject).digest);
    const code = () => api(service, '/v1/pairing-codes', { method: 'POST', json: {}, headers: { 'idempotency-key': 'code' } });
    const c1 = (await (await code()).json()) as { code: string };
    const c2 = (await (await code()).json()) as { code: string };
    assert.equal(c1.code, c2.code);
  }));

  test('SIGKILL right after the 202, restart, retry with the key: the same response, replayed', { timeout: 60_000 }, () => withService({}, async (service) => {
    const body = { model: 'lmsp-tiny', input: 'survive', background: true, max_output_tokens: 3 };
    const first = await create(service, 'crash-key', body);
    const firstBody = await first.text();
    service.child.kill('SIGKILL');
    await service.kill();
    const restarted = await service.restart();
    const retry = await create(restarted, 'crash-key', body);
    assert.equal(retry.status, 202);
    assert.equal(retry.headers.get('idempotent-replayed'), 'true');
    assert.equal(await retry.text(), firstBody);
    assert.equal(await taskCount(restarted), 1);
  }));

  test('a key whose plain request died with the process is released at recovery', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' } }, async (service) => {
      const body = { model: 'lmsp-tiny', input: 'dies', max_output_tokens: 1000 };
      void create(service, 'died', body).catch(() => undefined);
      await waitFor(async () => (await service.client.listTasks({ status: ['running'] })).data.length === 1);
      await service.kill();
      const restarted = await service.restart({ env: {} });
      const retry = await create(restarted, 'died', { ...body, max_output_tokens: 3 });
      assert.equal(retry.status, 200, 'not in flight any more');
      assert.equal(retry.headers.get('idempotent-replayed'), null);
      assert.equal(await taskCount(restarted), 2, 'the retry made a new task; the first one failed at recovery');
    }));

  test('keys expire after --idempotency-ttl and are swept', { timeout: 60_000 }, () =>
    withService({ args: ['--idempotency-ttl', '1s', '--sweep-interval', '500ms'] }, async (service) => {
      const body = { model: 'lmsp-tiny', input: 'short-lived', background: true, max_output_tokens: 2 };
      const first = (await (await create(service, 'ttl', body)).json()) as ResponseObject;
      const keys = () => {
        const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'), { readonly: true });
        try {
          return (db.prepare('SELECT count(*) AS n FROM idempotency_keys').get() as { n: number }).n;
        } finally {
          db.close();
        }
      };
      assert.equal(keys(), 1);
      await waitFor(() => keys() === 0, { timeoutMs: 10_000, what: 'the sweeper to delete the expired key' });
      const second = await create(service, 'ttl', body);
      assert.equal(second.headers.get('idempotent-replayed'), null);
      assert.notEqual(((await second.json()) as ResponseObject).id, first.id);
    }));

  test('a key outlives --idempotency-ttl while its request is being answered or its task is unfinished, then expires', { timeout: 90_000 }, () =>
    withService({ args: ['--idempotency-ttl', '1s', '--sweep-interval', '200ms', '--parallel', '2'], env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' } }, async (service) => {
      const background = { model: 'lmsp-tiny', input: 'long background', background: true, max_output_tokens: 4000 };
      const plain = { model: 'lmsp-tiny', input: 'long plain', max_output_tokens: 600 };
      const queued = await create(service, 'background', background);
      assert.equal(queued.status, 202);
      const queuedText = await queued.text();
      const first = create(service, 'plain', plain);
      await waitFor(async () => (await service.client.listTasks({ status: ['running'] })).data.length === 2);
      // Past the time to live, and past several sweeps.
      await new Promise((resolve) => setTimeout(resolve, 2500));
      assert.equal((await service.client.listTasks({ status: ['running'] })).data.length, 2, 'both still generate');
      const during = await create(service, 'plain', plain);
      assert.equal(during.status, 409);
      assert.equal(((await during.json()) as { error: { code: string } }).error.code, 'idempotency_key_in_flight');
      const again = await create(service, 'background', background);
      assert.equal(again.status, 202);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(await again.text(), queuedText);
      assert.equal(await taskCount(service), 2, 'no second task beside either');
      // Answered at last: replayable for the time to live from its answer.
      const original = await first;
      assert.equal(original.status, 200);
      const originalText = await original.text();
      const replay = await create(service, 'plain', plain);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.equal(await replay.text(), originalText);
      // Once its task is finished, the background key is as old as it is, and goes.
      const { id } = JSON.parse(queuedText) as ResponseObject;
      await api(service, `/v1/responses/${id}/cancel`, { method: 'POST' });
      await waitFor(async () => (await service.client.listTasks({ status: ['cancelled'] })).data.length === 1);
      await waitFor(async () => {
        const retry = await create(service, 'background', { ...background, max_output_tokens: 2 });
        if (retry.status === 422) return undefined; // the old key, not yet swept
        assert.equal(retry.status, 202);
        assert.equal(retry.headers.get('idempotent-replayed'), null);
        return true;
      }, { timeoutMs: 10_000, what: 'the finished task\'s expired key to be swept' });
      assert.equal(await taskCount(service), 3);
    }));

  test('a key whose task outlived its request in a crash is replayable for --idempotency-ttl from the end of that task', { timeout: 90_000 }, () =>
    withService({ args: ['--idempotency-ttl', '3s', '--sweep-interval', '200ms'], env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' } }, async (service) => {
      const body = { model: 'lmsp-tiny', input: 'survives a crash', max_output_tokens: 500, on_restart: 'resume' };
      void create(service, 'plain', body).catch(() => undefined);
      await waitFor(async () => (await service.client.listTasks({ status: ['running'] })).data.length === 1);
      await service.kill();
      // Down for longer than the time to live.
      await new Promise((resolve) => setTimeout(resolve, 3500));
      const restarted = await service.restart();
      await waitFor(async () => (await restarted.client.listTasks({ status: ['completed'] })).data.length === 1, { timeoutMs: 60_000, what: 'the task to finish' });
      const replay = await create(restarted, 'plain', body);
      assert.equal(replay.status, 200);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      await replay.text();
      assert.equal(await taskCount(restarted), 1, 'no second task');
      // Then it expires like any other.
      await waitFor(async () => {
        const retry = await create(restarted, 'plain', { ...body, max_output_tokens: 2 });
        await retry.text();
        return retry.status === 200 && retry.headers.get('idempotent-replayed') === null ? true : undefined;
      }, { timeoutMs: 15_000, what: 'the key to expire after its task finished' });
    }));
});
