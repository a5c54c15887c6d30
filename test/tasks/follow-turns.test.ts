/**
 * LMSP 16: a replay of a long event log is sent in pages, so many replays at once keep /healthz
 * and other requests answering. The replays take turns, one page a turn of the event loop: what
 * runs between two reads of the sockets stays one page, however many replays there are.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Store } from '../../src/store/index.js';
import { TaskEventBus } from '../../src/tasks/event-bus.js';
import { followTask } from '../../src/tasks/follow.js';
import { withDataDir } from '../helpers/data-dir.js';
import { insertResponseTask, machineOf, makeResponseAndTask } from '../helpers/fixtures.js';

describe('replays of long event logs at once', () => {
  test('take turns: between two turns of the event loop, one page is sent, not one page per replay', () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      const { response, task } = makeResponseAndTask();
      const created = store.db.transaction((tx) => insertResponseTask(store, tx, response, task));
      store.db.transaction((tx) => machineOf(store).cancel(tx, created.id));
      // 2,000 events more after the two of the cancelled task: ten pages, and no terminal event
      // among them, so each replay reads all ten and then waits for more, until it is aborted.
      store.db.transaction(() => {
        for (let seq = 3; seq <= 2002; seq++) store.events.append(created.id, seq, 'response.output_text.delta', 1, { delta: 'x' });
      });
      const bus = new TaskEventBus();
      const abort = new AbortController();
      let pages = 0;
      const replays = Array.from({ length: 40 }, () => followTask(store, bus, created.id, 2, abort.signal, () => {
        pages += 1;
      }));
      // A probe that runs once a turn of the event loop, as the reading of sockets does: the pages
      // sent since its last run are what the thread did in between.
      const between: number[] = [];
      let seen = 0;
      await new Promise<void>((resolve) => {
        const probe = () => {
          between.push(pages - seen);
          seen = pages;
          if (pages >= 40 * 10) resolve();
          else setImmediate(probe);
        };
        setImmediate(probe);
      });
      abort.abort();
      bus.taskChanged(created.id, store.tasks.get(created.id)!);
      assert.deepEqual(await Promise.all(replays), Array(40).fill('aborted'));
      // The first pages go out as the replays start (each as its request is read); after that,
      // at most one page, or two where the probe's turn fell between, per turn.
      assert.ok(Math.max(...between.slice(1)) <= 2, `pages sent between two turns: ${between.join(', ')}`);
    } finally {
      store.close();
    }
  }));
});
