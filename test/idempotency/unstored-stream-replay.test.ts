import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { api, withService, type TestService } from '../helpers/service.js';
import { collectSse } from '../helpers/sse.js';

function create(service: TestService, key: string, body: object): Promise<Response> {
  return api(service, '/v1/responses', { method: 'POST', json: body, headers: { 'idempotency-key': key } });
}

describe('Idempotency-Key on a streaming create with store: false (LMSP 6, 8)', () => {
  test('a replay sends the same events again, though the response and its log were deleted when it finished', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const body = { model: 'lmsp-tiny', input: 'stream, do not keep', stream: true, store: false, max_output_tokens: 6, seed: 3 };
      const first = await collectSse(await create(service, 'unstored-stream', body));
      assert.equal(first.at(-1)?.event, 'response.incomplete');
      const responseId = (JSON.parse(first[0]!.data) as { response: { id: string } }).response.id;
      assert.equal((await api(service, `/v1/responses/${responseId}`)).status, 404, 'store: false: deleted once finished');

      const replayed = await create(service, 'unstored-stream', body);
      assert.equal(replayed.status, 200);
      assert.equal(replayed.headers.get('idempotent-replayed'), 'true');
      assert.match(replayed.headers.get('content-type') ?? '', /^text\/event-stream/);
      const second = await collectSse(replayed);
      assert.deepEqual(second.map((frame) => [frame.id, frame.event, frame.data]), first.map((frame) => [frame.id, frame.event, frame.data]));
      assert.equal((await service.client.listTasks({ limit: 100 })).data.length, 0, 'no second task');
    }));
});
