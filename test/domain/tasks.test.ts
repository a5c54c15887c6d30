import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  assertTransition, canTransition, changedAtRecovery, RECOVERY, RESTART_POLICIES, settledStatus, statusAfterRecovery, TASK_STATUSES,
  TRANSITIONS, UNFINISHED_STATUSES,
} from '../../src/domain/tasks.js';

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
    const statuses = Object.fromEntries(RESTART_POLICIES.map((policy) => [policy,
      Object.fromEntries(UNFINISHED_STATUSES.map((status) => [status, statusAfterRecovery(status, RECOVERY[policy][status])]))]));
    assert.deepEqual(statuses, {
      fail: { queued: 'failed', loading: 'failed', running: 'failed', cancelling: 'cancelled' },
      retry: { queued: 'queued', loading: 'queued', running: 'queued', cancelling: 'cancelled' },
      resume: { queued: 'queued', loading: 'queued', running: 'running', cancelling: 'cancelled' },
    });
    for (const policy of RESTART_POLICIES) {
      for (const status of UNFINISHED_STATUSES) {
        assert.doesNotThrow(() => assertTransition(status, statusAfterRecovery(status, RECOVERY[policy][status]), 'recovery'));
      }
    }
    assert.throws(() => assertTransition('cancelling', 'queued', 'recovery'));
    assert.throws(() => assertTransition('queued', 'running', 'recovery'));
  });

  test('LMSP 7.5: only a queued task under retry or resume stays as it is at recovery', () => {
    const unchanged = RESTART_POLICIES.flatMap((policy) => UNFINISHED_STATUSES.filter((status) => RECOVERY[policy][status] === 'unchanged').map((status) => `${status}/${policy}`));
    assert.deepEqual(unchanged.sort(), ['queued/resume', 'queued/retry']);
    assert.deepEqual(changedAtRecovery(), [
      { status: 'queued', policies: ['fail'] },
      { status: 'loading', policies: ['fail', 'retry', 'resume'] },
      { status: 'running', policies: ['fail', 'retry', 'resume'] },
      { status: 'cancelling', policies: ['fail', 'retry', 'resume'] },
    ]);
  });

  test('LMSP 7.4: a cancel accepted first wins over a completion or a failure', () => {
    assert.equal(settledStatus('cancelling', 'completed'), 'cancelled');
    assert.equal(settledStatus('cancelling', 'failed'), 'cancelled');
    assert.equal(settledStatus('running', 'completed'), 'completed');
    assert.equal(settledStatus('loading', 'failed'), 'failed');
    assert.equal(canTransition('cancelling', 'completed'), false);
  });
});
