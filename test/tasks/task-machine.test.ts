import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Store } from '../../src/store/index.js';
import {
  RECOVERY, RESTART_POLICIES, statusAfterRecovery, UNFINISHED_STATUSES, type RestartPolicy, type Task, type UnfinishedStatus,
} from '../../src/domain/tasks.js';
import { withDataDir } from '../helpers/data-dir.js';
import { insertResponseTask, machineOf, makeResponseAndTask } from '../helpers/fixtures.js';
import { engineExit } from '../../src/tasks/task-machine.js';

function eventTypes(store: Store, taskId: string): string[] {
  return store.events.after(taskId, 0, 10_000).map((event) => event.type);
}

function assertGapless(store: Store, taskId: string): void {
  const events = store.events.after(taskId, 0, 100_000);
  events.forEach((event, index) => assert.equal(event.sequenceNumber, index + 1, `gap or duplicate at ${index + 1}`));
  assert.equal(store.tasks.get(taskId)!.lastSequenceNumber, events.length, 'last_sequence_number equals the newest event');
}

function created(store: Store, options: Parameters<typeof makeResponseAndTask>[0] = {}): Task {
  const { response, task } = makeResponseAndTask(options);
  return store.db.transaction((tx) => insertResponseTask(store, tx, response, task));
}

/** Puts a task in `status` through the normal transitions. */
function taskIn(store: Store, status: UnfinishedStatus | 'completed', policy: RestartPolicy = 'resume'): Task {
  const task = created(store, { onRestart: policy });
  const tx = (work: Parameters<Store['db']['transaction']>[0]) => store.db.transaction(work);
  if (status === 'queued') return store.tasks.get(task.id)!;
  tx((c) => machineOf(store).startLoading(c, task.id));
  if (status === 'loading') return store.tasks.get(task.id)!;
  tx((c) => machineOf(store).startRunning(c, task.id));
  tx((c) => machineOf(store).appendOutput(c, task.id, [{ text: 'ab', tokens: [10, 11] }, { text: 'c', tokens: [12] }]));
  if (status === 'running') return store.tasks.get(task.id)!;
  if (status === 'completed') {
    tx((c) => machineOf(store).complete(c, task.id, 'max_output_tokens'));
    return store.tasks.get(task.id)!;
  }
  tx((c) => machineOf(store).cancel(c, task.id));
  return store.tasks.get(task.id)!;
}

describe('task state machine and its log (LMSP 7, 11.2)', () => {
  test('create writes the task and response.created as event 1, in one transaction', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const task = created(store);
    assert.equal(task.status, 'queued');
    assert.deepEqual(eventTypes(store, task.id), ['response.created']);
    assertGapless(store, task.id);
    const event = store.events.after(task.id, 0, 1)[0]!;
    const payload = JSON.parse(event.data) as { response: { status: string; task: { last_sequence_number: number } } };
    assert.equal(payload.response.status, 'queued');
    assert.equal(payload.response.task.last_sequence_number, 1);
  }));

  test('a full run writes the events in the OpenAI order, gapless', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const task = taskIn(store, 'completed');
    assert.deepEqual(eventTypes(store, task.id), [
      'response.created', 'response.loading', 'response.in_progress', 'response.output_item.added',
      'response.content_part.added', 'response.output_text.delta', 'response.output_text.done',
      'response.content_part.done', 'response.output_item.done', 'response.incomplete',
    ]);
    assertGapless(store, task.id);
    assert.equal(task.status, 'completed');
    assert.equal(task.outputTokens, 3);
    assert.equal(store.responses.get(task.responseId!)!.outputText, 'abc');
    assert.deepEqual(store.events.snapshotTokens(task.id, 0), [10, 11, 12]);
  }));

  test('status and event are one transaction: a failing write leaves neither', () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    const task = created(store);
    await assert.rejects(store.db.write((c) => {
      machineOf(store).startLoading(c, task.id);
      throw new Error('crash in the middle');
    }));
    assert.equal(store.tasks.get(task.id)!.status, 'queued');
    assert.deepEqual(eventTypes(store, task.id), ['response.created']);
    assertGapless(store, task.id);
  }));

  test('cancel: queued -> cancelled, loading/running -> cancelling, then idempotent without new events', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const tx = <T>(work: Parameters<Store['db']['transaction']>[0]) => store.db.transaction(work) as T;
    const queued = created(store);
    assert.equal(tx<{ kind: string }>((c) => machineOf(store).cancel(c, queued.id)).kind, 'cancelled');
    assert.equal(tx<{ kind: string }>((c) => machineOf(store).cancel(c, queued.id)).kind, 'already_cancelled');
    assert.deepEqual(eventTypes(store, queued.id), ['response.created', 'response.cancelled']);

    const running = taskIn(store, 'running');
    assert.equal(tx<{ kind: string }>((c) => machineOf(store).cancel(c, running.id)).kind, 'cancelling');
    assert.equal(tx<{ kind: string }>((c) => machineOf(store).cancel(c, running.id)).kind, 'already_cancelling');
    assert.equal(eventTypes(store, running.id).filter((t) => t === 'response.cancelling').length, 1);

    const done = taskIn(store, 'completed');
    assert.equal(tx<{ kind: string }>((c) => machineOf(store).cancel(c, done.id)).kind, 'not_cancellable');
  }));

  test('completion after an accepted cancel ends cancelled, never completed (LMSP 7.4)', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const task = taskIn(store, 'cancelling');
    const result = store.db.transaction((c) => machineOf(store).complete(c, task.id, 'max_output_tokens'));
    assert.equal(result?.status, 'cancelled');
    const types = eventTypes(store, task.id);
    assert.equal(types.at(-1), 'response.cancelled');
    assert.ok(!types.includes('response.completed') && !types.includes('response.incomplete'));
    assertGapless(store, task.id);
    // The partial output stays on the response.
    assert.equal(store.responses.get(task.responseId!)!.outputText, 'abc');
  }));

  test('a failure after an accepted cancel also ends cancelled', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const task = taskIn(store, 'cancelling');
    const result = store.db.transaction((c) => machineOf(store).fail(c, task.id, 'engine_error', 'boom'));
    assert.equal(result?.status, 'cancelled');
  }));

  test('nothing is written after a terminal event', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const task = taskIn(store, 'completed');
    const before = eventTypes(store, task.id).length;
    store.db.transaction((c) => {
      assert.equal(machineOf(store).appendOutput(c, task.id, [{ text: 'late', tokens: [1] }]), false);
      assert.equal(machineOf(store).complete(c, task.id, 'stop'), null);
      assert.equal(machineOf(store).fail(c, task.id, 'engine_error', 'late'), null);
      assert.equal(machineOf(store).finishCancel(c, task.id), null);
    });
    assert.equal(eventTypes(store, task.id).length, before);
  }));

  for (const policy of RESTART_POLICIES) {
    for (const status of UNFINISHED_STATUSES) {
      const expected = statusAfterRecovery(status, RECOVERY[policy][status]);
      test(`recovery (LMSP 11.3): ${status} under ${policy} becomes ${expected}`, () => withDataDir((dir) => {
        const store = Store.open(dir);
        const task = taskIn(store, status, policy);
        const before = eventTypes(store, task.id);
        store.db.transaction((c) => machineOf(store).recover(c, task, 3));
        const after = store.tasks.get(task.id)!;
        assert.equal(after.status, expected);
        const added = eventTypes(store, task.id).slice(before.length);
        if (expected === 'failed') {
          assert.deepEqual(added, ['response.failed']);
          assert.equal(after.error?.code, 'server_restarted');
        } else if (expected === 'cancelled') {
          assert.deepEqual(added, ['response.cancelled']);
        } else if (status === 'queued') {
          assert.deepEqual(added, [], 'a queued task stays as it is, with no event');
        } else if (expected === 'queued') {
          assert.deepEqual(added, ['response.queued']);
          assert.equal(after.attempt, policy === 'retry' ? 2 : 1);
        } else {
          assert.deepEqual(added, ['response.resumed']);
        }
        assertGapless(store, task.id);
      }));
    }
  }

  test('recovery through a deferring context (one update per window) writes what it writes task by task', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const strip = (task: Task) => ({ ...task, id: '', seq: 0, responseId: '', createdAt: 0, startedAt: 0, finishedAt: task.finishedAt === null ? null : 0 });
    const payloads = (taskId: string) => store.events.after(taskId, 0, 10_000).map((event) => ({
      type: event.type, data: event.data.replaceAll(taskId, '').replace(/"(resp|msg)_[A-Za-z0-9]+"/g, '""').replace(/"created_at":\d+/g, ''),
    }));
    for (const policy of RESTART_POLICIES) {
      for (const status of UNFINISHED_STATUSES) {
        const one = taskIn(store, status, policy);
        const twin = taskIn(store, status, policy);
        store.db.transaction((c) => machineOf(store).recover(c, one, 3));
        store.db.transaction((transaction) => {
          const context = store.lifecycle.deferring(transaction);
          machineOf(store).recover(context, twin, 3);
          context.flush();
        });
        const label = `${status} under ${policy}`;
        assert.deepEqual(strip(store.tasks.get(twin.id)!), strip(store.tasks.get(one.id)!), label);
        assert.deepEqual(payloads(twin.id), payloads(one.id), label);
        assertGapless(store, twin.id);
      }
    }
  }));

  test('outputTexts reads a window\'s partial texts at once, as outputText reads each', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const machine = machineOf(store);
    const tasks = [taskIn(store, 'queued'), taskIn(store, 'loading'), taskIn(store, 'running'), taskIn(store, 'cancelling'), taskIn(store, 'running', 'retry')];
    // A second attempt (retry) whose output is only what follows its requeue, and a longer run.
    store.db.transaction((c) => machine.recover(c, tasks[4]!, 3));
    store.db.transaction((c) => machine.startRunning(c, tasks[4]!.id));
    store.db.transaction((c) => machine.appendOutput(c, tasks[4]!.id, [{ text: 'second "try" \u00e9', tokens: [20, 21] }]));
    store.db.transaction((c) => machine.appendOutput(c, tasks[2]!.id, [{ text: ' and more', tokens: [13] }]));
    const now = tasks.map((task) => store.tasks.get(task.id)!);
    const texts = machine.outputTexts(now);
    assert.deepEqual(now.map((task) => texts.get(task.id) ?? machine.outputText(task)), now.map((task) => machine.outputText(task)));
    assert.deepEqual(now.map((task) => machine.outputText(task)), ['', '', 'abc and more', 'abc', 'second "try" \u00e9']);
    assert.equal(texts.size, 3, 'only the tasks with output are read');
  }));

  test('a deferred recovery move whose task another writer changed first rolls the whole window back', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const untouched = taskIn(store, 'running', 'fail');
    const raced = taskIn(store, 'running', 'fail');
    const eventsBefore = [eventTypes(store, untouched.id), eventTypes(store, raced.id)];
    assert.throws(() => store.db.transaction((transaction) => {
      const context = store.lifecycle.deferring(transaction);
      machineOf(store).recover(context, untouched, 3);
      machineOf(store).recover(context, raced, 3);
      // Not possible at startup, where nothing else writes: the check that flush makes anyway. (A
      // writer that also logged an event would already have collided with the deferred one's number.)
      store.tasks.update({ ...raced, status: 'cancelling' }, 'running');
      context.flush();
    }), /recovery changed 1 of 2 tasks/);
    assert.equal(store.tasks.get(untouched.id)!.status, 'running');
    assert.equal(store.tasks.get(raced.id)!.status, 'running');
    assert.deepEqual([eventTypes(store, untouched.id), eventTypes(store, raced.id)], eventsBefore);
  }));

  test('retry drops the earlier output; resume keeps it', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const retried = taskIn(store, 'running', 'retry');
    store.db.transaction((c) => machineOf(store).recover(c, retried, 3));
    const retriedAfter = store.tasks.get(retried.id)!;
    assert.equal(machineOf(store).outputText(retriedAfter), '');
    assert.deepEqual(store.events.snapshotTokens(retried.id, retriedAfter.outputStartSeq), []);
    const resumed = taskIn(store, 'running', 'resume');
    store.db.transaction((c) => machineOf(store).recover(c, resumed, 3));
    const resumedAfter = store.tasks.get(resumed.id)!;
    assert.equal(machineOf(store).outputText(resumedAfter), 'abc');
    assert.deepEqual(store.events.snapshotTokens(resumed.id, resumedAfter.outputStartSeq), [10, 11, 12]);
  }));

  test('max_restarts: a task active at more than max_restarts restarts fails with server_restarted', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const task = taskIn(store, 'running', 'resume');
    for (let restart = 1; restart <= 3; restart++) {
      store.db.transaction((c) => machineOf(store).recover(c, store.tasks.get(task.id)!, 3));
      assert.equal(store.tasks.get(task.id)!.status, 'running', `restart ${restart} resumes`);
    }
    store.db.transaction((c) => machineOf(store).recover(c, store.tasks.get(task.id)!, 3));
    const after = store.tasks.get(task.id)!;
    assert.equal(after.status, 'failed');
    assert.equal(after.error?.code, 'server_restarted');
    assert.equal(after.error?.message, 'the task was interrupted 4 times (max_restarts is 3), the last time by a restart of the service');
    assert.equal(after.restarts, 4);
    assertGapless(store, task.id);
    // With max_restarts 0 the first restart is one too many, and the message counts it in words.
    const once = taskIn(store, 'running', 'resume');
    store.db.transaction((c) => machineOf(store).recover(c, store.tasks.get(once.id)!, 0));
    assert.equal(store.tasks.get(once.id)!.error?.message, 'the task was interrupted once (max_restarts is 0), the last time by a restart of the service');
  }));

  for (const policy of RESTART_POLICIES) {
    for (const status of ['loading', 'running', 'cancelling'] as const) {
      const expected = statusAfterRecovery(status, RECOVERY[policy][status]);
      test(`a runner that dies (LMSP 7.5): ${status} under ${policy} becomes ${expected}, as at startup`, () => withDataDir((dir) => {
        const store = Store.open(dir);
        const task = taskIn(store, status, policy);
        const before = eventTypes(store, task.id);
        const outcome = store.db.transaction((c) => machineOf(store).interrupt(c, task.id, 3, engineExit('the engine process exited unexpectedly (signal SIGKILL)')));
        assert.equal(outcome, RECOVERY[policy][status]);
        const after = store.tasks.get(task.id)!;
        assert.equal(after.status, expected);
        const added = eventTypes(store, task.id).slice(before.length);
        if (expected === 'failed') {
          assert.deepEqual(added, ['response.failed']);
          assert.deepEqual(after.error, { code: 'engine_error', message: 'the engine process exited unexpectedly (signal SIGKILL)' });
        } else if (expected === 'cancelled') {
          assert.deepEqual(added, ['response.cancelled'], 'a cancel accepted first wins');
        } else if (expected === 'queued') {
          assert.deepEqual(added, ['response.queued']);
          assert.equal(after.attempt, policy === 'retry' ? 2 : 1);
        } else {
          assert.deepEqual(added, ['response.resumed']);
        }
        assert.equal(after.restarts, status === 'cancelling' ? 0 : 1, 'the death counts as a restart');
        assertGapless(store, task.id);
      }));
    }
  }

  test('a runner that dies: queued and finished tasks are left alone', () => withDataDir((dir) => {
    const store = Store.open(dir);
    for (const status of ['queued', 'completed'] as const) {
      const task = taskIn(store, status, 'fail');
      const before = eventTypes(store, task.id);
      assert.equal(store.db.transaction((c) => machineOf(store).interrupt(c, task.id, 3, engineExit('gone'))), null);
      assert.equal(store.tasks.get(task.id)!.status, status);
      assert.deepEqual(eventTypes(store, task.id), before);
    }
  }));

  test('max_restarts: a task whose runner died more than max_restarts times fails with engine_error, saying why', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const task = taskIn(store, 'running', 'retry');
    const died = engineExit('the engine process exited unexpectedly (signal SIGKILL)');
    // A restart of the service and a runner's death count alike.
    store.db.transaction((c) => machineOf(store).recover(c, store.tasks.get(task.id)!, 2));
    for (const attempt of [2, 3]) {
      const current = store.tasks.get(task.id)!;
      assert.equal(current.status, 'queued');
      store.db.transaction((c) => machineOf(store).startLoading(c, task.id));
      store.db.transaction((c) => machineOf(store).startRunning(c, task.id));
      assert.equal(store.tasks.get(task.id)!.attempt, attempt);
      if (attempt === 3) break;
      assert.equal(store.db.transaction((c) => machineOf(store).interrupt(c, task.id, 2, died)), 'requeued');
    }
    assert.equal(store.db.transaction((c) => machineOf(store).interrupt(c, task.id, 2, died)), 'failed');
    const after = store.tasks.get(task.id)!;
    assert.equal(after.status, 'failed');
    assert.equal(after.restarts, 3);
    assert.deepEqual(after.error, {
      code: 'engine_error',
      message: 'the task was interrupted 3 times (max_restarts is 2), the last time because the engine process exited unexpectedly (signal SIGKILL)',
    });
    assertGapless(store, task.id);
  }));

  test('deleteFinished removes the response, task and events, and refuses unfinished tasks', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const running = taskIn(store, 'running');
    assert.equal(store.db.transaction(() => store.lifecycle.deleteFinished(running.id)), false);
    const done = taskIn(store, 'completed');
    assert.equal(store.db.transaction(() => store.lifecycle.deleteFinished(done.id)), true);
    assert.equal(store.tasks.get(done.id), null);
    assert.equal(store.responses.get(done.responseId!), null);
    assert.deepEqual(eventTypes(store, done.id), []);
  }));
});

describe('retention in the store (LMSP section 10)', () => {
  test('old finished tasks go with their events and response; old unfinished ones stay', () => withDataDir((dir) => {
    const store = Store.open(dir);
    const oldDone = taskIn(store, 'completed');
    const oldQueued = taskIn(store, 'queued');
    const oldRunning = taskIn(store, 'running');
    const oldCancelling = taskIn(store, 'cancelling');
    const recentDone = taskIn(store, 'completed');
    const longAgo = 1_000_000;
    // Back-date rows instead of sleeping.
    store.db.sqlite.prepare('UPDATE tasks SET created_at = ?, finished_at = CASE WHEN finished_at IS NULL THEN NULL ELSE ? END WHERE id IN (?, ?, ?, ?)')
      .run(longAgo, longAgo, oldDone.id, oldQueued.id, oldRunning.id, oldCancelling.id);
    const cutoff = longAgo + 10;
    let total = { tasks: 0, events: 0 };
    for (;;) {
      const batch = store.db.transaction(() => store.retention.sweepBatch(cutoff, 4));
      assert.ok(batch.tasks * 2 + batch.events <= 6, 'a batch stays near its bound');
      total = { tasks: total.tasks + batch.tasks, events: total.events + batch.events };
      if (batch.tasks === 0 && batch.events === 0) break;
    }
    assert.equal(total.tasks, 1);
    assert.equal(store.tasks.get(oldDone.id), null);
    assert.equal(store.responses.get(oldDone.responseId!), null);
    assert.deepEqual(eventTypes(store, oldDone.id), []);
    for (const kept of [oldQueued, oldRunning, oldCancelling, recentDone]) assert.ok(store.tasks.get(kept.id), `${kept.status} kept`);
  }));
});
