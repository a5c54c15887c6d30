/**
 * OpenAI's `truncation` on `POST /v1/responses` (LMSP 6; OpenAI where LMSP is silent): `disabled`,
 * the default, refuses an input that does not fit; `auto` leaves out the fewest oldest messages
 * for the rest to fit, the instructions kept. The response shows which it was.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ResponseObject } from '../../src/api/types.js';
import { api, errorOf, withService } from '../helpers/service.js';

// lmsp-tiny's tokens are bytes, and its context 16,384: 12,000 bytes is 12,000 tokens or more.
const LONG = 'hello world '.repeat(1000);

describe('truncation on Responses', () => {
  test('auto leaves out the oldest messages that do not fit; disabled refuses; the input items stay whole', { timeout: 120_000 }, () =>
    withService({}, async (service) => {
      const input = [
        { role: 'user', content: `first ${LONG}` },
        { role: 'assistant', content: `second ${LONG}` },
        { role: 'user', content: 'the question' },
      ];
      const body = { model: 'lmsp-tiny', instructions: 'Be brief.', input, max_output_tokens: 4 };

      const refused = await api(service, '/v1/responses', { method: 'POST', json: body });
      assert.equal(refused.status, 400);
      assert.equal((await errorOf(refused)).code, 'context_length_exceeded');

      const plain = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'hi', max_output_tokens: 2 } });
      assert.equal(((await plain.json()) as ResponseObject).truncation, 'disabled', 'disabled unless asked');

      const truncated = await api(service, '/v1/responses', { method: 'POST', json: { ...body, truncation: 'auto' } });
      assert.equal(truncated.status, 200);
      const response = (await truncated.json()) as ResponseObject;
      assert.equal(response.truncation, 'auto');
      assert.equal(response.usage!.output_tokens, 4);
      // One message of 12,000 tokens fits beside the question, two do not: only the first goes.
      assert.ok(response.usage!.input_tokens > 12_000 && response.usage!.input_tokens < 16_384 - 4, `input tokens ${response.usage!.input_tokens}`);
      const items = (await (await api(service, `/v1/responses/${response.id}/input_items?order=asc`)).json()) as { data: Array<{ role: string }> };
      assert.deepEqual(items.data.map((item) => item.role), ['user', 'assistant', 'user'], 'the input items are what was sent');
      const stored = (await (await api(service, `/v1/responses/${response.id}`)).json()) as ResponseObject;
      assert.equal(stored.truncation, 'auto');

      // A follow-up carries on from the truncated conversation, truncated again as needed.
      const next = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', previous_response_id: response.id, input: LONG, max_output_tokens: 4, truncation: 'auto' } });
      assert.equal(next.status, 200);
      const nextResponse = (await next.json()) as ResponseObject;
      assert.ok(nextResponse.usage!.input_tokens < 16_384 - 4);

      // A last message that cannot fit alone is refused, saying so.
      const alone = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: LONG.repeat(2), max_output_tokens: 4, truncation: 'auto' } });
      assert.equal(alone.status, 400);
      const error = await errorOf(alone);
      assert.equal(error.code, 'context_length_exceeded');
      assert.match(error.message, /truncation: auto/);

      const bogus = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', truncation: 'bogus' } });
      assert.equal(bogus.status, 400);
      assert.equal((await errorOf(bogus)).param, 'truncation');
    }));
});
