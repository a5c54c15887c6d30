/**
 * The record of a model pull beside its task (LMSP 5.1): the generation slots never take a pull,
 * the pull workers take resumed pulls first, recovery applies a pull's restart policy with its
 * own events, and the record goes with its task when retention deletes it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ModelPull } from '../../src/domain/pulls.js';
import type { RestartPolicy, Task } from '../../src/domain/tasks.js';
import { newId } from '../../src/ids.js';
import { Store } from '../../src/store/index.js';
import { recoverUnfinishedTasks } from '../../src/tasks/recovery.js';
import { nowSeconds } from '../../src/time.js';
import { withDataDir } from '../helpers/data-dir.js';
import { machineOf } from '../helpers/fixtures.js';

function insertPull(store: Store, modelId: string, onRestart: RestartPolicy = 'resume'): Task {
  const task: Task = {
    seq: 0, id: newId('task'), kind: 'model_pull', responseId: null, completionId: null, clientId: 'cli_test', model: modelId,
    status: 'queued', onRestart, attempt: 1, restarts: 0, createdAt: nowSeconds(), startedAt: null, finishedAt: null,
    lastSequenceNumber: 0, outputStartSeq: 0, inputTokens: null, outputTokens: 0, finishReason: null, error: null,
  };
  const pull: ModelPull = {
    taskId: task.id, modelId, source: `https://example.org/${modelId}.gguf`, url: `https://example.org/${modelId}.gguf`,
    modelsDir: '/nonexistent/models', expectedDigest: null, resume: null, digest: null, sizeBytes: null,
  };
  return store.db.transaction((context) => {
    store.pulls.insert(pull);
    return machineOf(store).create(context, task, { pull, model: null });
  });
}

function eventTypes(store: Store, taskId: string): string[] {
  return store.events.after(taskId, 0, 100).map((event) => event.type);
}

describe('model pull records (LMSP 5.1)', () => {
  test('the generation queue never offers a pull; the pull workers take resumed pulls before queued ones', () => withDataDir((dir) => {
    const store = Store.open(dir);
    try {
      const queued = insertPull(store, 'first');
      const running = insertPull(store, 'second');
      store.db.transaction((context) => machineOf(store).startRunning(context, running.id));
      assert.deepEqual(store.tasks.clientsWithQueuedTasks(), []);
      assert.equal(store.tasks.oldestQueuedOf('cli_test', []), null);
      assert.equal(store.tasks.nextResumed([]), null);
      assert.equal(store.pulls.nextResumed([])?.id, running.id, 'a running (resumed) pull');
      assert.equal(store.pulls.nextResumed([running.id]), null);
      assert.deepEqual(store.pulls.clientsWithQueuedTasks(), ['cli_test']);
      assert.equal(store.pulls.oldestQueuedOf('cli_test', [])?.id, queued.id);
      assert.equal(store.pulls.oldestQueuedOf('cli_test', [queued.id]), null);
      assert.equal(store.pulls.countUnfinishedForModel('first'), 1);
      assert.equal(store.pulls.countUnfinishedForModel('third'), 0);
    } finally {
      void store.close();
    }
  }));

  test('recovery: a running pull under resume goes on running with model.pull.resumed; under fail it fails', () => withDataDir((dir) => {
    const store = Store.open(dir);
    try {
      const resumed = insertPull(store, 'resumed', 'resume');
      const failed = insertPull(store, 'failed', 'fail');
      const retried = insertPull(store, 'retried', 'retry');
      for (const task of [resumed, failed, retried]) store.db.transaction((context) => machineOf(store).startRunning(context, task.id));
      store.db.transaction(() => store.pulls.setResumeState(resumed.id, { url: 'https://example.org/resumed.gguf', etag: '"x"', lastModified: null, totalBytes: 1000 }));
      const report = recoverUnfinishedTasks(store, machineOf(store), 3);
      assert.deepEqual([report.resumed, report.failed, report.requeued], [1, 1, 1]);
      assert.equal(store.tasks.get(resumed.id)!.status, 'running');
      assert.deepEqual(eventTypes(store, resumed.id), ['model.pull.created', 'model.pull.in_progress', 'model.pull.resumed']);
      const resumedEvent = JSON.parse(store.events.after(resumed.id, 2, 1)[0]!.data) as { downloaded_bytes: number; total_bytes: number };
      assert.deepEqual([resumedEvent.downloaded_bytes, resumedEvent.total_bytes], [0, 1000]);
      assert.equal(store.tasks.get(failed.id)!.error?.code, 'server_restarted');
      assert.equal(eventTypes(store, failed.id).at(-1), 'model.pull.failed');
      assert.deepEqual([store.tasks.get(retried.id)!.status, store.tasks.get(retried.id)!.attempt], ['queued', 2]);
      assert.equal(eventTypes(store, retried.id).at(-1), 'model.pull.queued');
      assert.ok(store.pulls.get(resumed.id)?.resume, 'the resume state stays for the worker');
      // The answer's own validators, weak ones too, come back for the resumed range's check.
      const seen = { url: 'https://example.org/resumed.gguf', etag: null, lastModified: null, totalBytes: 1000, seen: { etag: 'W/"w"', lastModified: 'Tue, 01 Oct 2024 10:00:00 GMT' } };
      store.db.transaction(() => store.pulls.setResumeState(resumed.id, seen));
      assert.deepEqual(store.pulls.get(resumed.id)?.resume, seen);
      // An answer without validators is kept as such (its bytes are never continued), not as a record from before they were kept.
      const none = { ...seen, seen: { etag: null, lastModified: null } };
      store.db.transaction(() => store.pulls.setResumeState(resumed.id, none));
      assert.deepEqual(store.pulls.get(resumed.id)?.resume, none);
      store.db.transaction(() => store.pulls.setResumeState(resumed.id, { url: seen.url, etag: null, lastModified: null, totalBytes: 1000 }));
      assert.deepEqual(store.pulls.get(resumed.id)?.resume, { url: seen.url, etag: null, lastModified: null, totalBytes: 1000 });
    } finally {
      void store.close();
    }
  }));

  test('retention deletes a finished pull\'s record with its task', () => withDataDir((dir) => {
    const store = Store.open(dir);
    try {
      const task = insertPull(store, 'old');
      const machine = machineOf(store);
      store.db.transaction((context) => machine.startRunning(context, task.id));
      store.db.transaction((context) => machine.fail(context, task.id, 'download_failed', 'gone'));
      store.db.sqlite.prepare('UPDATE tasks SET finished_at = 1 WHERE id = ?').run(task.id);
      assert.ok(store.pulls.get(task.id));
      const swept = store.db.transaction(() => store.retention.sweepBatch(100, 1000));
      assert.equal(swept.tasks, 1);
      assert.equal(store.tasks.get(task.id), null);
      assert.equal(store.pulls.get(task.id), null, 'the pull record went with its task');
    } finally {
      void store.close();
    }
  }));
});
