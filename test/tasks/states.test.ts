import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  assertTransition, RECOVERY, RESTART_POLICIES, TASK_STATUSES, TRANSITIONS, UNFINISHED_STATUSES, responseStatusOf,
} from '../../src/tasks/states.js';

describe('task state machine (LMSP 7.2)', () => {
  test('allows exactly the transitions of LMSP 7.2', () => {
    const allowed = new Set([
      'queued->loading', 'queued->running', 'queued->cancelled',
      'loading->running', 'loading->failed', 'loading->cancelling',
      'running->completed', 'running->failed', 'running->cancelling',
      'cancelling->cancelled',
    ]);
    for (const from of TASK_STATUSES) {
      for (const to of TASK_STATUSES) {
        const key = `${from}->${to}`;
        if (allowed.has(key)) assert.doesNotThrow(() => assertTransition(from, to), key);
        else assert.throws(() => assertTransition(from, to), /cannot go/, key);
      }
    }
  });

  test('final states have no way out', () => {
    for (const status of ['completed', 'failed', 'cancelled'] as const) {
      assert.deepEqual(TRANSITIONS[status], []);
      for (const to of TASK_STATUSES) assert.throws(() => assertTransition(status, to, 'recovery'));
    }
  });

  test('the recovery table is LMSP 11.3 cell for cell', () => {
    assert.deepEqual(RECOVERY, {
      fail: { queued: 'failed', loading: 'failed', running: 'failed', cancelling: 'cancelled' },
      retry: { queued: 'queued', loading: 'queued', running: 'queued', cancelling: 'cancelled' },
      resume: { queued: 'queued', loading: 'queued', running: 'running', cancelling: 'cancelled' },
    });
    for (const policy of RESTART_POLICIES) {
      for (const status of UNFINISHED_STATUSES) {
        assert.doesNotThrow(() => assertTransition(status, RECOVERY[policy][status], 'recovery'));
      }
    }
    assert.throws(() => assertTransition('cancelling', 'queued', 'recovery'));
    assert.throws(() => assertTransition('queued', 'running', 'recovery'));
  });

  test('response status follows the task status', () => {
    assert.equal(responseStatusOf('queued', null), 'queued');
    assert.equal(responseStatusOf('loading', null), 'in_progress');
    assert.equal(responseStatusOf('running', null), 'in_progress');
    assert.equal(responseStatusOf('cancelling', null), 'in_progress');
    assert.equal(responseStatusOf('completed', 'stop'), 'completed');
    assert.equal(responseStatusOf('completed', 'max_output_tokens'), 'incomplete');
    assert.equal(responseStatusOf('failed', null), 'failed');
    assert.equal(responseStatusOf('cancelled', null), 'cancelled');
  });
});
