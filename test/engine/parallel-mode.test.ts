/**
 * `--parallel-mode auto`, the default: sequences of one context on a GPU backend, a runner process
 * per slot on the CPU. The rule asks llama.cpp for its backend only when the answer decides
 * something, and the service runs its slots the way it says it does.
 */
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { chooseParallelMode, probeBackend } from '../../src/engine/parallel-mode.js';
import { api, childPids, waitFor, withService } from '../helpers/service.js';

const noProbe = () => Promise.reject(new Error('the backend was asked for although the answer decides nothing'));
const settings = (gpu: 'auto' | 'cpu') => ({ gpu, threads: 1, stateDir: join(tmpdir(), 'lmsp-probe-states'), tokenDelayMs: 0 });

describe('--parallel-mode', () => {
  test('auto takes sequences on a GPU backend and processes on the CPU, asking llama.cpp only when it must', async () => {
    assert.deepEqual(await chooseParallelMode('processes', 4, 'cuda', noProbe), { mode: 'processes', reason: '--parallel-mode' });
    assert.deepEqual(await chooseParallelMode('sequences', 4, 'cpu', noProbe), { mode: 'sequences', reason: '--parallel-mode' });
    assert.equal((await chooseParallelMode('auto', 1, 'auto', noProbe)).mode, 'processes');
    assert.equal((await chooseParallelMode('auto', 4, 'cpu', noProbe)).mode, 'processes');
    for (const gpu of ['cuda', 'vulkan', 'metal'] as const) {
      assert.deepEqual(await chooseParallelMode('auto', 4, gpu, noProbe), { mode: 'sequences', reason: `GPU backend (--gpu ${gpu})` });
    }
    assert.deepEqual(await chooseParallelMode('auto', 4, 'auto', () => Promise.resolve('cuda')), { mode: 'sequences', reason: 'GPU backend (cuda)' });
    assert.deepEqual(await chooseParallelMode('auto', 4, 'auto', () => Promise.resolve(false)),
      { mode: 'processes', reason: 'llama.cpp found no GPU: CPU backend' });
    const failed = await chooseParallelMode('auto', 4, 'auto', () => Promise.reject(new Error('runner died')));
    assert.equal(failed.mode, 'processes');
    assert.match(failed.reason, /runner died/);
  });

  test('the probe asks a runner process which backend llama.cpp loaded, and ends it', { skip: process.platform !== 'linux' && 'counts processes in /proc' }, async () => {
    assert.equal(await probeBackend(settings('cpu')), false);
    const backend = await probeBackend(settings('auto'));
    assert.ok(backend === false || ['cuda', 'vulkan', 'metal'].includes(backend), `backend ${String(backend)}`);
    assert.deepEqual(childPids(process.pid), [], 'the probe runners are gone');
  });

  test('by default the service runs --parallel 2 as its backend calls for, and logs why', { timeout: 120_000, skip: process.platform !== 'linux' && 'counts runner processes in /proc' }, async () => {
    const expected = (await probeBackend(settings('auto'))) === false ? 'processes' : 'sequences';
    await withService({ args: ['--parallel', '2'], env: { LMSP_LOG_LEVEL: 'info', LMSP_LOG_FORMAT: 'json', LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
      const line = service.output().split('\n').filter((text) => text.startsWith('{'))
        .map((text) => JSON.parse(text) as { msg: string; parallel_mode?: string; reason?: string })
        .find((entry) => entry.parallel_mode !== undefined);
      assert.ok(line, `a startup line names the parallel mode:\n${service.output()}`);
      assert.equal(line.parallel_mode, expected);
      assert.equal(line.msg, `parallel slots run as ${expected}`);
      assert.match(line.reason!, expected === 'processes' ? /CPU backend/ : /GPU backend/);

      const ids: string[] = [];
      for (const seed of [1, 2]) {
        const created = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'Tell a long story.', background: true, max_output_tokens: 400, seed } });
        assert.equal(created.status, 202);
        ids.push(((await created.json()) as { task: { id: string } }).task.id);
      }
      await waitFor(async () => {
        const statuses = await Promise.all(ids.map(async (id) => ((await (await api(service, `/v1/tasks/${id}`)).json()) as { status: string }).status));
        return statuses.every((status) => status === 'running');
      }, { what: 'both tasks to run at once' });
      assert.equal(childPids(service.pid).length, expected === 'processes' ? 2 : 1, 'runner processes while two tasks generate');
    });
  });
});
