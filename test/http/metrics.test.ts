/**
 * LMSP 15: GET /metrics in the Prometheus text format, read back with a real parser, moves with
 * the work the service does; only the `metrics` and `admin` scopes may scrape it.
 */
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { ResponseObject, TaskEvent } from '../../src/api/types.js';
import { scrape } from '../helpers/prometheus.js';
import { api, pairClient, waitFor, withService } from '../helpers/service.js';
import { readSse } from '../helpers/sse.js';

const SPEC_METRICS = [
  'lmsp_http_requests_total', 'lmsp_http_request_duration_seconds', 'lmsp_tasks', 'lmsp_tasks_finished_total',
  'lmsp_queue_wait_seconds', 'lmsp_time_to_first_token_seconds', 'lmsp_generated_tokens_total', 'lmsp_model_loads_total',
  'lmsp_models_loaded', 'lmsp_open_streams', 'lmsp_db_commit_duration_seconds', 'lmsp_recovered_tasks_total',
];

describe('GET /metrics (LMSP 15)', () => {
  test('scrape access: metrics or admin scope; another scope gets 403 insufficient_scope, no token 401', () => withService({}, async (service) => {
    const scraper = await pairClient(service, ['metrics'], 'prometheus');
    const responder = await pairClient(service, ['responses', 'models:read'], 'app');

    const plain = await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${scraper.token}` } });
    assert.equal(plain.status, 200);
    assert.match(plain.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    assert.ok((await scrape(service.url, service.token)).families.size > 0, 'the operator (admin) scrapes too');

    const denied = await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${responder.token}` } });
    assert.equal(denied.status, 403);
    assert.equal(((await denied.json()) as { error: { code: string } }).error.code, 'insufficient_scope');
    const anonymous = await fetch(`${service.url}/metrics`);
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer');
    // A scrape token can do nothing else, not even read or revoke its own record (LMSP 4).
    for (const [method, path] of [['GET', '/v1/tasks'], ['GET', '/v1/clients/me'], ['DELETE', '/v1/clients/me'], ['GET', '/v1/models']]) {
      const refused = await api({ url: service.url, token: scraper.token }, path!, { method });
      assert.equal(refused.status, 403, `${method} ${path}`);
      assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'insufficient_scope');
    }
    const still = await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${scraper.token}` } });
    assert.equal(still.status, 200, 'the refused DELETE revoked nothing');
    // A token with metrics and another scope reads its own record as every token does.
    const both = await pairClient(service, ['metrics', 'responses'], 'both');
    assert.equal((await api({ url: service.url, token: both.token }, '/v1/clients/me')).status, 200);
  }));

  test('every metric of the spec, and the process and Node.js metrics, with the labels it names', () => withService({}, async (service) => {
    await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
    const metrics = await scrape(service.url, service.token);
    for (const name of SPEC_METRICS) assert.ok(metrics.families.has(name), `${name} is exposed`);
    assert.ok([...metrics.families.keys()].some((name) => name.startsWith('process_')), 'process_* metrics');
    assert.ok([...metrics.families.keys()].some((name) => name.startsWith('nodejs_')), 'nodejs_* metrics');
    assert.equal(metrics.family('lmsp_http_request_duration_seconds').type, 'HISTOGRAM');
    for (const name of ['lmsp_queue_wait_seconds', 'lmsp_time_to_first_token_seconds', 'lmsp_db_commit_duration_seconds']) {
      assert.equal(metrics.family(name).type, 'HISTOGRAM', name);
    }
    const labels = (name: string) => Object.keys(metrics.family(name).metrics[0]?.labels ?? {}).sort();
    assert.deepEqual(labels('lmsp_http_requests_total'), ['method', 'route', 'status']);
    assert.deepEqual(labels('lmsp_tasks'), ['kind', 'status']);
    assert.deepEqual(labels('lmsp_tasks_finished_total'), ['kind', 'status']);
    assert.deepEqual(labels('lmsp_generated_tokens_total'), ['model']);
    assert.deepEqual(labels('lmsp_model_loads_total'), ['model', 'result']);
    assert.deepEqual(labels('lmsp_recovered_tasks_total'), ['action']);
    // Queue waits and first tokens are measured from milliseconds to minutes.
    const bounds = Object.keys(metrics.family('lmsp_queue_wait_seconds').metrics[0]!.buckets!).map(Number).filter(Number.isFinite);
    assert.ok(Math.min(...bounds) <= 0.005 && Math.max(...bounds) >= 300, `queue wait buckets ${bounds.join(',')}`);
  }));

  test('counters move with the work: tokens, finished tasks by status, requests by route, a cancel, open streams', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '10' } }, async (service) => {
      const app = await pairClient(service, ['responses'], 'app');
      const scraper = await pairClient(service, ['metrics'], 'prometheus');
      const before = await scrape(service.url, scraper.token);
      const commitsBefore = before.count('lmsp_db_commit_duration_seconds');

      const finished: ResponseObject[] = [];
      for (let i = 0; i < 3; i++) finished.push((await app.client.createResponse({ model: 'lmsp-tiny', input: `n${i}`, max_output_tokens: 8 })).body);
      assert.ok(finished.every((response) => response.status === 'incomplete'));

      // A long background task, followed by a stream, then cancelled.
      const long = (await app.client.createResponse({ model: 'lmsp-tiny', input: 'long', max_output_tokens: 5000, background: true })).body;
      await waitFor(async () => ((await app.client.getResponse(long.id)).usage?.output_tokens ?? 0) > 0, { what: 'the long task to produce output' });
      const stream = await fetch(`${service.url}/v1/tasks/${long.task.id}/events?stream=true`, { headers: { authorization: `Bearer ${app.token}` } });
      const frames = readSse(stream);
      await frames.next();
      await waitFor(async () => (await scrape(service.url, scraper.token)).value('lmsp_open_streams') === 1, { what: 'one open stream' });
      const cancel = await api({ url: service.url, token: app.token }, `/v1/tasks/${long.task.id}/cancel`, { method: 'POST' });
      assert.equal(cancel.status, 202);
      for await (const frame of frames) if (frame.event === 'response.cancelled') break;
      await waitFor(async () => (await scrape(service.url, scraper.token)).value('lmsp_open_streams') === 0, { what: 'the stream to be closed' });

      await api({ url: service.url, token: app.token }, `/v1/tasks/${finished[0]!.task.id}`);
      await api({ url: service.url, token: app.token }, `/v1/tasks/${finished[1]!.task.id}`);
      assert.equal((await api(service, `/v1/no/such/route/${'x'.repeat(10)}`)).status, 404);

      const after = await scrape(service.url, scraper.token);
      const cancelled = await app.client.getResponse(long.id);
      assert.equal(cancelled.status, 'cancelled');
      const outputTokens = [...finished, cancelled].reduce((total, response) => total + response.usage!.output_tokens, 0);
      assert.equal(after.value('lmsp_generated_tokens_total', { model: 'lmsp-tiny' }), outputTokens, 'every committed token is counted once');

      assert.equal(after.value('lmsp_tasks_finished_total', { kind: 'response', status: 'completed' }), 3);
      assert.equal(after.value('lmsp_tasks_finished_total', { kind: 'response', status: 'cancelled' }), 1);
      assert.equal(after.value('lmsp_tasks_finished_total', { status: 'failed' }), 0);
      assert.equal(after.value('lmsp_tasks', { kind: 'response', status: 'completed' }), 3);
      assert.equal(after.value('lmsp_tasks', { kind: 'response', status: 'cancelled' }), 1);
      assert.equal(after.value('lmsp_tasks', { kind: 'response', status: 'queued' }), 0);
      assert.equal(after.value('lmsp_tasks', { kind: 'response', status: 'running' }), 0);

      assert.equal(after.count('lmsp_queue_wait_seconds'), 4, 'one queue wait per started task');
      assert.equal(after.count('lmsp_time_to_first_token_seconds'), 4, 'one first token per run');
      assert.equal(after.value('lmsp_model_loads_total', { model: 'lmsp-tiny', result: 'loaded' }), 1);
      assert.equal(after.value('lmsp_models_loaded'), 1);
      assert.ok(after.count('lmsp_db_commit_duration_seconds') > commitsBefore, 'commits are timed');

      assert.equal(after.value('lmsp_http_requests_total', { method: 'POST', route: '/v1/responses', status: '200' }), 3);
      assert.equal(after.value('lmsp_http_requests_total', { method: 'POST', route: '/v1/responses', status: '202' }), 1);
      assert.equal(after.value('lmsp_http_requests_total', { method: 'POST', route: '/v1/tasks/:id/cancel', status: '202' }), 1);
      assert.equal(after.value('lmsp_http_requests_total', { method: 'GET', route: '/v1/tasks/:id', status: '200' }), 2);
      assert.ok(after.value('lmsp_http_requests_total', { route: 'unmatched', status: '404' }) >= 1);
      assert.equal(after.count('lmsp_http_request_duration_seconds', { method: 'POST', route: '/v1/responses' }), 4);
      const routes = after.labelValues('lmsp_http_requests_total', 'route');
      assert.ok(routes.every((route) => !/task_|resp_|cli_|xxxx/.test(route)), `no ids in route labels: ${routes.join(' ')}`);
    }));

  test('a model removed from the registry takes its series with it; the others stay', { timeout: 120_000 }, () => withService({}, async (service) => {
    copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'gone.gguf'));
    assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'gone.gguf', id: 'gone' } })).status, 201);
    for (const model of ['gone', 'lmsp-tiny']) {
      const created = await api(service, '/v1/responses', { method: 'POST', json: { model, input: 'x', max_output_tokens: 3 } });
      assert.equal(((await created.json()) as ResponseObject).status, 'incomplete');
    }
    const before = await scrape(service.url, service.token);
    assert.ok(before.labelValues('lmsp_generated_tokens_total', 'model').includes('gone'));
    assert.ok(before.labelValues('lmsp_model_loads_total', 'model').includes('gone'));
    assert.equal((await api(service, '/v1/models/gone', { method: 'DELETE' })).status, 200);
    const after = await scrape(service.url, service.token);
    assert.deepEqual(after.labelValues('lmsp_generated_tokens_total', 'model'), ['lmsp-tiny']);
    assert.deepEqual(after.labelValues('lmsp_model_loads_total', 'model'), ['lmsp-tiny']);
    assert.equal(after.value('lmsp_generated_tokens_total', { model: 'lmsp-tiny' }), 3);
  }));

  test('requests the router refuses before any route (a malformed URL) are counted as unmatched', () =>
    withService({}, async (service) => {
      const auth = { authorization: `Bearer ${service.token}` };
      assert.equal((await fetch(`${service.url}/v1/tasks/%zz`, { headers: auth })).status, 400);
      assert.equal((await fetch(`${service.url}/v1/%zz`, { method: 'POST', headers: auth })).status, 400);
      assert.equal((await fetch(`${service.url}/v1/no-such-route`, { headers: auth })).status, 404);
      const metrics = await scrape(service.url, service.token);
      assert.equal(metrics.value('lmsp_http_requests_total', { method: 'GET', route: 'unmatched', status: '400' }), 1);
      assert.equal(metrics.value('lmsp_http_requests_total', { method: 'POST', route: 'unmatched', status: '400' }), 1);
      assert.equal(metrics.value('lmsp_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }), 1);
      assert.equal(metrics.count('lmsp_http_request_duration_seconds', { method: 'GET', route: 'unmatched' }), 2);
    }));

  test('requests their client leaves are counted when it leaves: a stream it closed with its 200, a plain create it abandoned with 499', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
      const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 500 });
      const reader = new AbortController();
      const stream = await api(service, `/v1/tasks/${created.body.task.id}/events?stream=true`, { signal: reader.signal });
      assert.equal(stream.status, 200);
      for await (const frame of readSse(stream)) if (Number(frame.id) >= 3) break;
      reader.abort();
      const leaver = new AbortController();
      const plain = api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'y', max_output_tokens: 500 }, signal: leaver.signal });
      await waitFor(async () => (await service.client.listTasks({ status: ['queued', 'running'] })).data.length === 2, { what: 'the plain create to be written' });
      leaver.abort();
      await plain.catch(() => undefined);
      const events = { method: 'GET', route: '/v1/tasks/:id/events' };
      const creates = { method: 'POST', route: '/v1/responses' };
      const metrics = await waitFor(async () => {
        const now = await scrape(service.url, service.token);
        return now.value('lmsp_http_requests_total', { ...creates, status: '499' }) === 1 ? now : null;
      }, { what: 'the abandoned create to be counted' });
      assert.equal(metrics.value('lmsp_http_requests_total', { ...events, status: '200' }), 1, 'the closed stream');
      assert.equal(metrics.count('lmsp_http_request_duration_seconds', events), 1);
      assert.equal(metrics.value('lmsp_http_requests_total', { ...creates, status: '202' }), 1, 'the background create');
      assert.equal(metrics.count('lmsp_http_request_duration_seconds', creates), 2);
    }));

  test('recovery at startup is counted by action; a resumed run counts only its new tokens and no first token', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
      const resumed = (await service.client.createResponse({ model: 'lmsp-tiny', input: 'a', max_output_tokens: 5000, background: true, on_restart: 'resume' })).body;
      const failed = (await service.client.createResponse({ model: 'lmsp-tiny', input: 'b', max_output_tokens: 5, background: true, on_restart: 'fail' })).body;
      await waitFor(async () => ((await service.client.getResponse(resumed.id)).usage?.output_tokens ?? 0) >= 5, { what: 'output before the crash' });
      await service.kill();

      const restarted = await service.restart();
      const metrics = await scrape(restarted.url, restarted.token);
      assert.equal(metrics.value('lmsp_recovered_tasks_total', { action: 'resumed' }), 1);
      assert.equal(metrics.value('lmsp_recovered_tasks_total', { action: 'failed' }), 1);
      assert.equal(metrics.value('lmsp_recovered_tasks_total', { action: 'requeued' }), 0);
      assert.equal(metrics.value('lmsp_tasks_finished_total', { kind: 'response', status: 'failed' }), 1);
      assert.equal((await restarted.client.getResponse(failed.id)).error?.code, 'server_restarted');

      await waitFor(async () => ((await restarted.client.getResponse(resumed.id)).usage?.output_tokens ?? 0) >= 20, { what: 'output after the restart' });
      await restarted.client.request('POST', `/v1/responses/${resumed.id}/cancel`);
      const final = await waitFor(async () => {
        const response = await restarted.client.getResponse(resumed.id);
        return response.status === 'cancelled' ? response : null;
      }, { what: 'the cancel' });
      const events: TaskEvent[] = (await restarted.client.taskEvents(resumed.task.id, 0, 1000)).data;
      const resumedEvent = events.find((event) => event.type === 'response.resumed')!;
      const tokensAtRestart = resumedEvent.output_tokens as number;
      const after = await scrape(restarted.url, restarted.token);
      assert.equal(after.value('lmsp_generated_tokens_total', { model: 'lmsp-tiny' }), final.usage!.output_tokens - tokensAtRestart);
      assert.equal(after.count('lmsp_time_to_first_token_seconds'), 0, 'a resumed run is not a fresh start');
      assert.equal(after.count('lmsp_queue_wait_seconds'), 0, 'a resumed run never waited in the queue');
    }));
});
