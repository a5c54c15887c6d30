/**
 * A cancel accepted while a task loads ends it cancelled, whenever it lands (LMSP 7.4): before
 * the load ends (the load stops), or after it ended but before the task was marked running.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GenerationCancelled, type Engine } from '../../src/engine/engine.js';
import type { RunnerPool } from '../../src/engine/runner-pool.js';
import { buildTestApp } from '../helpers/app.js';
import { withDataDir } from '../helpers/data-dir.js';
import { withEngine } from '../helpers/engine.js';
import { waitFor } from '../helpers/service.js';

/** The real pool, whose loads run `afterLoad` once the model is loaded and before they return. */
function withAfterLoad(pool: RunnerPool, afterLoad: () => Promise<void>): Engine {
  return {
    acquire: (model) => {
      const lease = pool.acquire(model);
      if (!lease) return null;
      return {
        ...lease,
        load: async (signal, confirm) => {
          await lease.load(signal, confirm);
          await afterLoad();
        },
      };
    },
    countTokens: (model, messages, tools) => pool.countTokens(model, messages, tools),
    embed: (model, request, signal, confirm) => pool.embed(model, request, signal, confirm),
    loadedModelIds: () => pool.loadedModelIds(),
    isLoaded: (model) => pool.isLoaded(model),
    unloadModel: (model) => pool.unloadModel(model),
    onCapacity: (listener) => pool.onCapacity(listener),
    close: () => pool.close(),
  };
}

describe('a cancel that lands as the load ends (LMSP 7.4)', () => {
  test('cancelled after the model loaded and before the task ran: cancelled, and the next task runs', { timeout: 120_000 }, () => withDataDir(async (dir) => {
    let cancelNext: (() => Promise<void>) | null = null;
    const { app, scheduler, operatorToken, close } = await buildTestApp(dir, {}, {
      engine: (pool) => withAfterLoad(pool, async () => {
        const cancel = cancelNext;
        cancelNext = null;
        await cancel?.();
      }),
    });
    const headers = { authorization: `Bearer ${operatorToken}`, 'content-type': 'application/json' };
    const create = (input: string) => app.inject({ method: 'POST', url: '/v1/responses', headers,
      payload: JSON.stringify({ model: 'lmsp-tiny', input, background: true, max_output_tokens: 2 }) });
    const taskOf = async (id: string) =>
      (await app.inject({ method: 'GET', url: `/v1/tasks/${id}`, headers: { authorization: headers.authorization } })).json<{ status: string }>();
    try {
      const first = (await create('cancelled as its load ends')).json<{ task: { id: string } }>();
      let cancelStatus = 0;
      cancelNext = async () => {
        const cancel = await app.inject({ method: 'POST', url: `/v1/tasks/${first.task.id}/cancel`, headers: { authorization: headers.authorization } });
        cancelStatus = cancel.statusCode;
      };
      scheduler.start();
      const ended = await waitFor(async () => {
        const task = await taskOf(first.task.id);
        return task.status === 'cancelled' ? task : null;
      }, { timeoutMs: 20_000 });
      assert.equal(cancelStatus, 202, 'the cancel was accepted while the task was loading');
      assert.equal(ended.status, 'cancelled');
      const events = (await app.inject({ method: 'GET', url: `/v1/tasks/${first.task.id}/events`, headers: { authorization: headers.authorization } }))
        .json<{ data: Array<{ type: string }> }>().data.map((event) => event.type);
      assert.deepEqual(events, ['response.created', 'response.loading', 'response.cancelling', 'response.cancelled']);
      // The slot was given back: a task after it runs to its end.
      const second = (await create('after it')).json<{ task: { id: string } }>();
      await waitFor(async () => ((await taskOf(second.task.id)).status === 'completed' ? true : null), { timeoutMs: 20_000 });
    } finally {
      await close();
    }
  }));

  test('a load asked for by a lease already cancelled starts nothing, and says so at once', { timeout: 60_000 }, () => {
    const loads: string[] = [];
    return withEngine({ onModelLoad: (_id, outcome) => loads.push(outcome) }, async ({ engine, tiny }) => {
      const lease = engine.acquire(tiny)!;
      assert.ok(lease.needsLoad);
      const abort = new AbortController();
      abort.abort();
      await assert.rejects(lease.load(abort.signal), GenerationCancelled);
      assert.deepEqual(loads, [], 'no load was made, so none was counted');
      assert.deepEqual([...engine.loadedModelIds()], []);
      lease.release();
    });
  });
});
