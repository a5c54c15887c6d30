import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { api, withService } from '../helpers/service.js';
import { collectSse } from '../helpers/sse.js';

describe('Idempotency-Key replay of a streaming create whose record was deleted since (LMSP 8)', () => {
  test('a response: 404 not_found, not an empty event stream, and no new task', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      for (const background of [false, true]) {
        const key = `deleted-${background}`;
        const body = { model: 'lmsp-tiny', input: 'stream, then delete', stream: true, background, max_output_tokens: 3 };
        const frames = await collectSse(await api(service, '/v1/responses', { method: 'POST', json: body, headers: { 'idempotency-key': key } }));
        const responseId = (JSON.parse(frames[0]!.data) as { response: { id: string } }).response.id;
        assert.equal((await api(service, `/v1/responses/${responseId}`, { method: 'DELETE' })).status, 200);

        const replayed = await api(service, '/v1/responses', { method: 'POST', json: body, headers: { 'idempotency-key': key } });
        assert.equal(replayed.status, 404, `background: ${background}`);
        const error = ((await replayed.json()) as { error: { code: string; type: string } }).error;
        assert.equal(error.code, 'not_found');
      }
      assert.equal((await service.client.listTasks({ limit: 100 })).data.length, 0);
    }));

  test('a stored chat completion: 404 not_found as well', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const body = { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'x' }], stream: true, store: true, max_completion_tokens: 3 };
      const frames = await collectSse(await api(service, '/v1/chat/completions', { method: 'POST', json: body, headers: { 'idempotency-key': 'chat-deleted' } }));
      const completionId = (JSON.parse(frames[0]!.data) as { id: string }).id;
      assert.equal((await api(service, `/v1/chat/completions/${completionId}`, { method: 'DELETE' })).status, 200);
      const replayed = await api(service, '/v1/chat/completions', { method: 'POST', json: body, headers: { 'idempotency-key': 'chat-deleted' } });
      assert.equal(replayed.status, 404);
      assert.equal(((await replayed.json()) as { error: { code: string } }).error.code, 'not_found');
    }));
});
