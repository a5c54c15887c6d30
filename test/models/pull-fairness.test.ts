/**
 * LMSP 16 for pulls: "when several clients have queued tasks, the next slot goes to the client
 * that has waited longest for one". Pulls are tasks with slots of their own (at most two
 * downloads at once, LMSP 5.1); a client that queues one pull behind another client's long
 * queue gets the next free slot. Downloads are held slow by the local model server, and a slot
 * is freed by a cancel, so the order does not depend on timing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TaskObject } from '../../src/api/types.js';
import { MAX_CONCURRENT_PULLS } from '../../src/domain/pulls.js';
import { startModelServer, tinyModelBytes, type ModelServer } from '../helpers/model-server.js';
import { api, pairClient, waitFor, withService, type TestService } from '../helpers/service.js';

let server: ModelServer;

before(async () => {
  server = await startModelServer();
});
after(async () => {
  await server?.close();
});

/** A pull whose download stays running until it is cancelled (a few hundred bytes a second). */
async function slowPull(service: TestService, token: string, id: string): Promise<TaskObject> {
  const source = server.serveHf({ owner: 'fair', repo: 'queue', file: `${id}.gguf` }, tinyModelBytes());
  server.behave(`/fair/queue/resolve/main/${id}.gguf`, { bytesPerSecond: 500 });
  const answer = await api(service, '/v1/models/pull', { method: 'POST', json: { source, id }, headers: { authorization: `Bearer ${token}` } });
  assert.equal(answer.status, 202, await answer.clone().text());
  return (await answer.json()) as TaskObject;
}

describe('pull slots are shared fairly between clients (LMSP 16, 5.1)', () => {
  test('a client that queues a pull behind another client\'s queue gets the next free slot', () =>
    withService({ env: { LMSP_HF_ENDPOINT: server.url } }, async (service) => {
      const greedy = await pairClient(service, ['responses', 'models:write'], 'greedy');
      const patient = await pairClient(service, ['responses', 'models:write'], 'patient');
      const greedyPulls: TaskObject[] = [];
      for (let i = 0; i < MAX_CONCURRENT_PULLS + 2; i++) greedyPulls.push(await slowPull(service, greedy.token, `greedy-${i}`));
      const status = async (task: TaskObject) => (await service.client.getTask(task.id)).status;
      await waitFor(async () => (await Promise.all(greedyPulls.slice(0, MAX_CONCURRENT_PULLS).map(status))).every((s) => s === 'running'),
        { what: 'the greedy client\'s first pulls to take every slot' });
      const patientPull = await slowPull(service, patient.token, 'patient-0');
      assert.equal(await status(patientPull), 'queued');

      // One slot frees: it goes to the patient client, not to the greedy client's next pull.
      assert.equal((await api(service, `/v1/tasks/${greedyPulls[0]!.id}/cancel`, { method: 'POST' })).status, 202);
      const waiting = [patientPull, ...greedyPulls.slice(MAX_CONCURRENT_PULLS)];
      const startedNext = await waitFor(async () => {
        for (const task of waiting) if ((await status(task)) === 'running') return task;
        return null;
      }, { what: 'a queued pull to take the freed slot' });
      assert.equal(startedNext.id, patientPull.id, 'the patient client\'s pull takes the freed slot');
      for (const task of greedyPulls.slice(MAX_CONCURRENT_PULLS)) assert.equal(await status(task), 'queued', `${task.model} waits its turn`);

      for (const task of [...greedyPulls, patientPull]) await api(service, `/v1/tasks/${task.id}/cancel`, { method: 'POST' });
    }));
});
