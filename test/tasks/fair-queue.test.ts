/**
 * LMSP 16: "the next slot goes to the client that has waited longest for one (round robin),
 * first in, first out within a client". The queue is driven here as the scheduler drives it
 * (next, then served when a slot is taken), over a real store, one slot at a time.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Task } from '../../src/domain/tasks.js';
import { Store } from '../../src/store/index.js';
import { FairQueue } from '../../src/tasks/fair-queue.js';
import { withDataDir } from '../helpers/data-dir.js';
import { insertResponseTask, machineOf, makeResponseAndTask } from '../helpers/fixtures.js';

function queueTask(store: Store, queue: FairQueue, clientId: string): Task {
  const { response, task } = makeResponseAndTask({ clientId });
  const written = store.db.transaction((tx) => insertResponseTask(store, tx, response, task));
  queue.noteQueued(clientId);
  return written;
}

/** Takes the one slot: the next task starts (it leaves `queued`), as the scheduler's pump does. */
function takeSlot(store: Store, queue: FairQueue): Task {
  const task = queue.next([]);
  assert.ok(task, 'a queued task');
  queue.served(task.clientId);
  store.db.transaction((tx) => machineOf(store).startLoading(tx, task.id));
  return task;
}

describe('fair scheduling between clients (LMSP 16)', () => {
  test('a client that queues while another holds the only slot gets the next one', () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      const queue = new FairQueue(store.tasks);
      const greedy = [queueTask(store, queue, 'cli_greedy'), queueTask(store, queue, 'cli_greedy'), queueTask(store, queue, 'cli_greedy')];
      assert.equal(takeSlot(store, queue).id, greedy[0]!.id, 'the first task takes the free slot');
      // The greedy client holds the slot and has more queued when the patient one arrives.
      const patient = queueTask(store, queue, 'cli_patient');
      const order = [takeSlot(store, queue), takeSlot(store, queue), takeSlot(store, queue)].map((task) => task.id);
      assert.deepEqual(order, [patient.id, greedy[1]!.id, greedy[2]!.id], 'the patient client first, then the greedy one in FIFO order');
    } finally {
      await store.close();
    }
  }));

  test('two long queues alternate, each in its own FIFO order', () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      const queue = new FairQueue(store.tasks);
      const a = [queueTask(store, queue, 'cli_a'), queueTask(store, queue, 'cli_a'), queueTask(store, queue, 'cli_a')];
      const b = [queueTask(store, queue, 'cli_b'), queueTask(store, queue, 'cli_b'), queueTask(store, queue, 'cli_b')];
      const order = a.concat(b).map(() => takeSlot(store, queue).id);
      assert.deepEqual(order, [a[0], b[0], a[1], b[1], a[2], b[2]].map((task) => task!.id));
    } finally {
      await store.close();
    }
  }));

  test('a client that comes back after a while is due before one served since', () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      const queue = new FairQueue(store.tasks);
      const early = queueTask(store, queue, 'cli_early');
      assert.equal(takeSlot(store, queue).id, early.id);
      const busy = [queueTask(store, queue, 'cli_busy'), queueTask(store, queue, 'cli_busy')];
      assert.equal(takeSlot(store, queue).id, busy[0]!.id);
      // The early client was last served before the busy one: it has waited longer.
      const back = queueTask(store, queue, 'cli_early');
      assert.equal(takeSlot(store, queue).id, back.id);
      assert.equal(takeSlot(store, queue).id, busy[1]!.id);
    } finally {
      await store.close();
    }
  }));
});
