/**
 * LMSP 15: `lmsp_tasks{kind,status}` and `lmsp_tasks_finished_total{kind,status}` as a scraper
 * sees them on a fresh service: every task kind the protocol names (section 7.1) has its series,
 * zeros included, before its first task, so an alert on queued chat completions or pulls, or a
 * rate of failed pulls, has a series to watch from the start.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FINAL_STATUSES, TASK_KINDS, TASK_STATUSES } from '../../src/domain/tasks.js';
import { scrape } from '../helpers/prometheus.js';
import { withService } from '../helpers/service.js';

describe('metric series before the first task (LMSP 15)', () => {
  test('lmsp_tasks and lmsp_tasks_finished_total have a zero for every kind and status on a fresh service', () => withService({}, async (service) => {
    const metrics = await scrape(service.url, service.token);
    for (const kind of TASK_KINDS) {
      for (const status of TASK_STATUSES) {
        const samples = metrics.samples('lmsp_tasks', { kind, status });
        assert.equal(samples.length, 1, `lmsp_tasks{kind="${kind}",status="${status}"}`);
        assert.equal(Number(samples[0]!.value), 0);
      }
      for (const status of FINAL_STATUSES) {
        const samples = metrics.samples('lmsp_tasks_finished_total', { kind, status });
        assert.equal(samples.length, 1, `lmsp_tasks_finished_total{kind="${kind}",status="${status}"}`);
        assert.equal(Number(samples[0]!.value), 0);
      }
    }
  }));
});
