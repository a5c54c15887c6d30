/**
 * LMSP 16: "the next slot goes to the client that has waited longest for one (round robin),
 * first in, first out within a client". The queue is driven here as the scheduler drives it
 * (next, served when a slot is taken, released when it is given back), over a real store.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Task } from '../../src/domain/tasks.js';
import { Store } from '../../src/store/index.js';
import { FairQueue } from '../../src/tasks/fair-queue.js';
import { withDataDir } from '../helpers/data-dir.js';
import { insertResponseTask, machineOf, makeResponseAndTask } from '../helpers/fixtures.js';

class Slots {
  readonly queue: FairQueue;

  constructor(private readonly store: Store) {
    this.queue = new FairQueue(store.tasks);
  }

  add(clientId: string): Task {
    const { response, task } = makeResponseAndTask({ clientId });
    const written = this.store.db.transaction((tx) => insertResponseTask(this.store, tx, response, task));
    this.queue.noteQueued(clientId);
    return written;
  }

  /** A slot is taken: the next task starts (it leaves `queued`), as the scheduler's pump does. */
  take(): Task {
    const task = this.queue.next([]);
    assert.ok(task, 'a queued task');
    this.queue.served(task.clientId);
    this.store.db.transaction((tx) => machineOf(this.store).startLoading(tx, task.id));
    return task;
  }

  release(task: Task): void {
    this.queue.released(task.clientId);
  }

  /** One slot: take it, give it back, as many times as asked; the ids in the order they ran. */
  runOneByOne(count: number): string[] {
    return Array.from({ length: count }, () => {
      const task = this.take();
      this.release(task);
      return task.id;
    });
  }
}

async function withSlots(run: (slots: Slots) => void): Promise<void> {
  await withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      run(new Slots(store));
    } finally {
      await store.close();
    }
  });
}

const ids = (tasks: Array<Task | undefined>) => tasks.map((task) => task!.id);

describe('fair scheduling between clients (LMSP 16)', () => {
  test('a client that queues while another holds the only slot gets the next one', () => withSlots((slots) => {
    const greedy = [slots.add('cli_greedy'), slots.add('cli_greedy'), slots.add('cli_greedy')];
    const first = slots.take();
    assert.equal(first.id, greedy[0]!.id, 'the first task takes the free slot');
    // The greedy client holds the slot and has more queued when the patient one arrives.
    const patient = slots.add('cli_patient');
    slots.release(first);
    assert.deepEqual(slots.runOneByOne(3), ids([patient, greedy[1], greedy[2]]), 'the patient client first, then the greedy one in FIFO order');
  }));

  test('two long queues alternate, each in its own FIFO order', () => withSlots((slots) => {
    const a = [slots.add('cli_a'), slots.add('cli_a'), slots.add('cli_a')];
    const b = [slots.add('cli_b'), slots.add('cli_b'), slots.add('cli_b')];
    assert.deepEqual(slots.runOneByOne(6), ids([a[0], b[0], a[1], b[1], a[2], b[2]]));
  }));

  test('a client waiting since its last turn ended goes before one that has just arrived', () => withSlots((slots) => {
    const a = [slots.add('cli_a'), slots.add('cli_a')];
    const b = [slots.add('cli_b'), slots.add('cli_b')];
    assert.deepEqual(slots.runOneByOne(2), ids([a[0], b[0]]), 'a and b have had a turn each');
    const running = slots.take();
    assert.equal(running.id, a[1]!.id);
    // b has waited since its turn ended; c arrives while a's second task runs.
    const c = slots.add('cli_c');
    slots.release(running);
    assert.deepEqual(slots.runOneByOne(2), ids([b[1], c]));
  }));

  test('with two slots, a freed slot goes to a client holding none before one holding the other', () => withSlots((slots) => {
    const greedy = [slots.add('cli_greedy'), slots.add('cli_greedy'), slots.add('cli_greedy')];
    const [first, second] = [slots.take(), slots.take()];
    assert.deepEqual(ids([first, second]), ids([greedy[0], greedy[1]]), 'one client may fill both slots');
    const patient = slots.add('cli_patient');
    slots.release(first);
    assert.equal(slots.take().id, patient.id);
    slots.release(second);
    assert.equal(slots.take().id, greedy[2]!.id);
  }));
});
