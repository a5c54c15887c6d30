/**
 * LMSP 2: "A `Last-Event-ID` that is not a decimal integer gets 400 `invalid_request`", said of
 * every request, not only of the streams that read it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { api, withService } from '../helpers/service.js';

describe('a malformed Last-Event-ID (LMSP 2)', () => {
  test('is 400 invalid_request naming it, on streams and JSON pages alike; a decimal one is accepted everywhere', () =>
    withService({}, async (service) => {
      const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 3 });
      const { id, task } = created.body;
      for (const path of [`/v1/tasks/${task.id}/events?stream=true`, `/v1/tasks/${task.id}/events`, `/v1/responses/${id}?stream=true`,
        `/v1/responses/${id}`, '/v1/tasks']) {
        for (const value of ['abc', '-1', '1.5', '']) {
          const answer = await api(service, path, { headers: { 'last-event-id': value } });
          assert.equal(answer.status, 400, `${path} with Last-Event-ID '${value}'`);
          const { error } = (await answer.json()) as { error: { code: string; param: string } };
          assert.deepEqual([error.code, error.param], ['invalid_request', 'Last-Event-ID']);
        }
        for (const value of ['1', '12345678901234567890']) {
          const fine = await api(service, path, { headers: { 'last-event-id': value } });
          assert.equal(fine.status, 200, `${path} with Last-Event-ID '${value}'`);
          await fine.body?.cancel();
        }
      }
    }));
});
