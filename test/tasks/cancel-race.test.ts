import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { TaskEvent } from '../../src/api/types.js';
import { api, waitFor, withService } from '../helpers/service.js';

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled']);

describe('cancel cannot race completion (LMSP 7.4, 11.2)', () => {
  test('a 2xx cancel always ends cancelled, a 409 always completed, with one terminal event, last', { timeout: 180_000 }, () =>
    // The worker keeps generating for 40 ms after a cancel, so completions and cancels collide.
    withService({ env: { LMSP_DEBUG_CANCEL_DELAY_MS: '40' }, args: ['--parallel', '2'] }, async (service) => {
      await service.client.createResponse({ model: 'lmsp-tiny', input: 'warm up', max_output_tokens: 1 });
      const outcomes = { cancelled: 0, completed: 0 };
      for (let round = 0; round < 12; round++) {
        await Promise.all(Array.from({ length: 5 }, async (_, index) => {
          const created = await service.client.createResponse({ model: 'lmsp-tiny', input: `race ${round}.${index}`, background: true, max_output_tokens: 24 });
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 150));
          const cancel = await api(service, `/v1/responses/${created.body.id}/cancel`, { method: 'POST' });
          const taskId = created.body.task.id;
          const final = await waitFor(async () => {
            const task = await service.client.getTask(taskId);
            return ['completed', 'failed', 'cancelled'].includes(task.status) ? task : null;
          });
          if (cancel.status === 200 || cancel.status === 202) {
            assert.equal(final.status, 'cancelled', `an accepted cancel (${cancel.status}) must end cancelled`);
            outcomes.cancelled += 1;
          } else {
            assert.equal(cancel.status, 409);
            assert.equal(final.status, 'completed');
            outcomes.completed += 1;
          }
          const events: TaskEvent[] = (await service.client.taskEvents(taskId, 0, 1000)).data;
          const terminals = events.filter((event) => TERMINAL.has(event.type));
          assert.equal(terminals.length, 1, 'exactly one terminal event');
          assert.equal(events.at(-1)!.type, terminals[0]!.type, 'the terminal event is the last');
          events.forEach((event, i) => assert.equal(event.sequence_number, i + 1));
        }));
      }
      assert.ok(outcomes.cancelled > 0 && outcomes.completed > 0, `both outcomes happened: ${JSON.stringify(outcomes)}`);
    }));
});
