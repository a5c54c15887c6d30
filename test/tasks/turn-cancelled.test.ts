/**
 * LMSP 16: a queued task whose model cannot load yet keeps its turn, and the free slot waits for
 * it. Once that task is cancelled, the slot waits for nothing: the next task takes it at once.
 */
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { ResponseObject } from '../../src/api/types.js';
import { api, waitFor, withService } from '../helpers/service.js';

describe('a queued task that held the turn, cancelled', () => {
  test('gives the slot it kept to the next task at once, not when the running task ends', { timeout: 90_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' }, args: ['--parallel', '2', '--max-loaded-models', '1'] }, async (service) => {
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'other.gguf'));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'other.gguf', id: 'other' } })).status, 201);
      const create = async (model: string, tokens: number) =>
        (await (await api(service, '/v1/responses', { method: 'POST', json: { model, input: 'hi', max_output_tokens: tokens, background: true } })).json()) as ResponseObject;
      const status = async (id: string) => ((await (await api(service, `/v1/responses/${id}`)).json()) as ResponseObject).status;
      const long = await create('lmsp-tiny', 1000);
      await waitFor(async () => (await status(long.id)) === 'in_progress', { what: 'the long task to run' });
      // `other` cannot load while lmsp-tiny is in use (one model at a time): it holds the turn,
      // and the next lmsp-tiny task waits behind it although the second slot is free.
      const blocked = await create('other', 5);
      const next = await create('lmsp-tiny', 5);
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(await status(next.id), 'queued', 'behind the task that holds the turn');
      assert.equal((await api(service, `/v1/responses/${blocked.id}/cancel`, { method: 'POST' })).status, 200);
      await waitFor(async () => (await status(next.id)) !== 'queued', { timeoutMs: 5_000, what: 'the next task to take the free slot' });
      assert.equal(await status(long.id), 'in_progress', 'while the long task still runs');
      assert.equal((await api(service, `/v1/responses/${long.id}/cancel`, { method: 'POST' })).status, 202);
    }));
});
