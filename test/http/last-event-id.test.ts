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

describe('starting_after, the cursor of the query (LMSP 6, 7.3)', () => {
  test('is decimal digits only, as Last-Event-ID: hex, exponents, signs and fractions are 400 naming it', () =>
    withService({}, async (service) => {
      const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 3 });
      const { id, task } = created.body;
      for (const path of [`/v1/tasks/${task.id}/events?stream=true`, `/v1/tasks/${task.id}/events`, `/v1/responses/${id}?stream=true`]) {
        const separator = path.includes('?') ? '&' : '?';
        for (const value of ['0x10', '1e1', '-1', '1.5', '+2', 'abc', '']) {
          const answer = await api(service, `${path}${separator}starting_after=${encodeURIComponent(value)}`);
          assert.equal(answer.status, 400, `${path} with starting_after '${value}'`);
          const { error } = (await answer.json()) as { error: { code: string; param: string } };
          assert.deepEqual([error.code, error.param], ['invalid_request', 'starting_after']);
        }
      }
      const page = (await (await api(service, `/v1/tasks/${task.id}/events?starting_after=2`)).json()) as { data: Array<{ sequence_number: number }> };
      assert.equal(page.data[0]?.sequence_number, 3, 'a decimal cursor: the events after it');
      const beyond = (await (await api(service, `/v1/tasks/${task.id}/events?starting_after=99999999999999999999`)).json()) as { data: unknown[] };
      assert.deepEqual(beyond.data, [], 'a number past every sequence number: nothing after it');
    }));
});
