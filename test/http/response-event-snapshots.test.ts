/**
 * LMSP 7.3: the events follow the OpenAI stream. There, `response.in_progress` carries
 * `output: []`, and an output item first appears with `response.output_item.added`; a client that
 * keeps the latest `response` of the log and applies the item events to it must not see an item
 * twice.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ResponseObject, TaskEvent } from '../../src/api/types.js';
import { withService } from '../helpers/service.js';

describe('the response snapshots of a response task log (LMSP 7.3)', () => {
  test('no event carries an output item before response.output_item.added announced it', { timeout: 60_000 }, () =>
    withService({}, async (service) => {
      const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'snapshots', max_output_tokens: 4 });
      const events = (await service.client.taskEvents(created.body.task.id, 0, 1000)).data as TaskEvent[];
      const types = events.map((event) => event.type);
      assert.ok(types.includes('response.in_progress') && types.includes('response.output_item.added'), types.join(', '));
      let announced = 0;
      for (const event of events) {
        if (event.type === 'response.output_item.added') announced += 1;
        const response = event.response as ResponseObject | undefined;
        if (response) assert.ok(response.output.length <= announced, `${event.type} (#${event.sequence_number}) holds ${response.output.length} items, ${announced} announced`);
      }
      const inProgress = events.find((event) => event.type === 'response.in_progress')!.response as ResponseObject;
      assert.deepEqual(inProgress.output, []);
      assert.equal(inProgress.status, 'in_progress');
      const last = events.at(-1)!.response as ResponseObject;
      assert.equal(last.output.length, 1, 'the finished response has its message');
    }));
});
