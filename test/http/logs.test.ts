/**
 * LMSP 12 (Logs): JSON lines when standard output is not a terminal, readable lines on request;
 * every task status change once at info level; and never a secret: the whole output of a service
 * that paired clients and ran tasks holds none of the tokens and codes it handed out.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LmspClient } from '../../src/api/client.js';
import { api, pairClient, waitFor, withService } from '../helpers/service.js';
import { collectSse } from '../helpers/sse.js';
import { openSocket } from '../helpers/raw-http.js';

interface LogLine {
  level: number;
  msg: string;
  task?: string;
  kind?: string;
  client?: string;
  from?: string | null;
  status?: string | number;
  ms?: number;
  route?: string;
  method?: string;
  request_id?: string;
}

function jsonLines(output: string): LogLine[] {
  return output.split('\n').filter((line) => line.trim() !== '').map((line) => JSON.parse(line) as LogLine);
}

describe('logs (LMSP 12)', () => {
  test('no token or pairing code the service handed out appears anywhere in its output', () =>
    withService({ env: { LMSP_LOG_LEVEL: 'trace', LMSP_LOG_FORMAT: 'json', LMSP_DEBUG_TOKEN_DELAY_MS: '5' } }, async (service) => {
      const secrets: string[] = [service.token];
      const codes: string[] = [];
      for (const scopes of [['responses'], ['admin'], ['metrics']]) {
        const code = await service.client.createPairingCode({ name: `c-${scopes[0]}`, scopes });
        codes.push(code.code);
        const paired = await fetch(`${service.url}/v1/pair`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': `pair-${scopes[0]}` },
          body: JSON.stringify({ code: code.code, client_name: `client ${scopes[0]}` }),
        });
        assert.equal(paired.status, 201);
        secrets.push(((await paired.json()) as { token: string }).token);
      }
      // A wrong code and a used one are logged as failures, if at all, without the code.
      codes.push('ZZZZ-ZZZZ');
      assert.equal((await fetch(`${service.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ code: 'ZZZZ-ZZZZ', client_name: 'x' }) })).status, 401);
      assert.equal((await fetch(`${service.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ code: codes[0], client_name: 'again' }) })).status, 401);

      const app = new LmspClient({ baseUrl: service.url, token: secrets[1]! });
      await app.createResponse({ model: 'lmsp-tiny', input: 'plain', max_output_tokens: 5 });
      await collectSse(await api({ url: service.url, token: secrets[1]! }, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 's', max_output_tokens: 5, stream: true } }));
      const background = (await app.createResponse({ model: 'lmsp-tiny', input: 'b', max_output_tokens: 2000, background: true })).body;
      await waitFor(async () => (await app.getResponse(background.id)).status === 'in_progress', { what: 'the task to run' });
      await api({ url: service.url, token: secrets[1]! }, `/v1/responses/${background.id}/cancel`, { method: 'POST', headers: { 'idempotency-key': 'cancel-1' } });
      await waitFor(async () => (await app.getResponse(background.id)).status === 'cancelled', { what: 'the cancel' });
      // Requests with the tokens in every header a client might use.
      await api({ url: service.url, token: secrets[2]! }, '/v1/clients');
      await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${secrets[3]}` } });
      await fetch(`${service.url}/v1/tasks`, { headers: { authorization: `Bearer ${secrets[1]}x` } });
      await service.stop();

      const output = service.output();
      assert.ok(jsonLines(output).some((line) => line.msg === 'task completed'), 'the log is not empty');
      // Debug (and trace) add a line per request: its route, status and time, never its URL.
      const answered = jsonLines(output).filter((line) => line.msg === 'request answered');
      const cancel = answered.find((line) => line.route === '/v1/responses/:id/cancel');
      assert.ok(cancel && cancel.method === 'POST' && cancel.status === 202 && typeof cancel.ms === 'number' && /^req_/.test(cancel.request_id ?? ''),
        JSON.stringify(cancel));
      assert.ok(answered.some((line) => line.route === '/v1/pair' && line.status === 401), 'refusals too');
      assert.ok(!answered.some((line) => JSON.stringify(line).includes(background.id)), 'no id from a URL');
      for (const secret of secrets) {
        assert.ok(!output.includes(secret), 'a token appears in the output');
        assert.ok(!output.includes(secret.slice('lmsp_'.length)), 'a token body appears in the output');
      }
      for (const code of codes) {
        assert.ok(!output.includes(code), `pairing code ${code.slice(0, 2)}... appears in the output`);
        assert.ok(!output.includes(code.replace('-', '')), 'a pairing code appears in the output without its dash');
      }
    }));

  test('JSON lines off a terminal: each status change of a task logged once, with its kind, client and timing', () =>
    withService({ env: { LMSP_LOG_LEVEL: 'info' } }, async (service) => {
      const app = await pairClient(service, ['responses'], 'app');
      const done = (await app.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 10, background: true })).body;
      await waitFor(async () => (await app.client.getResponse(done.id)).status === 'incomplete', { what: 'the task to finish' });
      const lines = await waitFor(() => {
        const parsed = jsonLines(service.output());
        return parsed.some((line) => line.task === done.task.id && line.status === 'completed') ? parsed : null;
      }, { what: 'the completion to be logged' });
      const ofTask = lines.filter((line) => line.task === done.task.id);
      const statuses = ofTask.map((line) => line.status);
      assert.equal(statuses[0], 'queued');
      assert.equal(statuses.at(-1), 'completed');
      assert.ok(statuses.includes('running'));
      assert.equal(new Set(statuses).size, statuses.length, `each change once: ${statuses.join(' ')}`);
      for (const line of ofTask) {
        assert.equal(line.level, 30, 'info');
        assert.equal(line.kind, 'response');
        assert.equal(line.client, app.id);
        assert.equal(line.msg, `task ${line.status}`);
      }
      for (const line of ofTask.slice(1)) {
        assert.equal(typeof line.ms, 'number', 'time in the previous status');
        assert.equal(line.from, statuses[statuses.indexOf(line.status!) - 1]);
      }
    }));

  test('a client that leaves in the middle of its body is logged at info, not as a failure of the service', () =>
    withService({ env: { LMSP_LOG_FORMAT: 'json', LMSP_LOG_LEVEL: 'info' } }, async (service) => {
      const { host } = new URL(service.url);
      const socket = await openSocket(service.url);
      socket.write(`POST /v1/responses HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${service.token}\r\n`
        + 'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":');
      await new Promise((resolve) => setTimeout(resolve, 200));
      socket.destroy();
      const line = await waitFor(() => jsonLines(service.output()).find((entry) => entry.msg === 'the client left during its request'),
        { what: 'the line of the abandoned request' });
      assert.equal(line.level, 30);
      assert.deepEqual(jsonLines(service.output()).filter((entry) => entry.level >= 50), [], 'no error line');
    }));

  test('recovery at startup logs each change with the status the task was left in', () =>
    withService({ args: ['--parallel', '1'], env: { LMSP_LOG_LEVEL: 'info', LMSP_DEBUG_TOKEN_DELAY_MS: '50' } }, async (service) => {
      const body = { model: 'lmsp-tiny', input: 'x', max_output_tokens: 500, background: true } as const;
      // With one slot the first runs and the second waits: one is left running, the other queued.
      const resuming = (await service.client.createResponse({ ...body, on_restart: 'resume' })).body;
      const failing = (await service.client.createResponse({ ...body, on_restart: 'fail' })).body;
      await waitFor(async () => (await service.client.getTask(resuming.task.id)).status === 'running', { what: 'the task to run' });
      const statusOf = async (id: string) => (await service.client.getTask(id)).status;
      const before = { failing: await statusOf(failing.task.id) };
      await service.kill();
      const restarted = await service.restart({ env: { LMSP_LOG_LEVEL: 'info', LMSP_DEBUG_TOKEN_DELAY_MS: '50' } });
      const lines = await waitFor(() => {
        const parsed = jsonLines(restarted.output()).filter((line) => line.msg.endsWith('at startup'));
        return parsed.length >= 2 ? parsed : null;
      }, { what: 'the recovery to be logged' });
      const failed = lines.find((line) => line.task === failing.task.id)!;
      assert.equal(before.failing, 'queued');
      assert.deepEqual([failed.from, failed.status, failed.msg], ['queued', 'failed', 'task failed at startup']);
      const resumed = lines.find((line) => line.task === resuming.task.id)!;
      assert.deepEqual([resumed.from, resumed.status, resumed.msg], ['running', 'running', 'task running at startup']);
      await restarted.kill();
    }));

  test('--log-format pretty: readable lines instead of JSON', () =>
    withService({ args: ['--log-format', 'pretty'], env: { LMSP_LOG_LEVEL: 'info' } }, async (service) => {
      const created = (await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 3 })).body;
      const output = await waitFor(() => (service.output().includes('task completed') ? service.output() : null), { what: 'the completion to be logged' });
      const lines = output.split('\n').filter((line) => line.trim() !== '');
      assert.ok(lines.length > 3);
      for (const line of lines) assert.throws(() => JSON.parse(line), `not a JSON line: ${line}`);
      const completed = lines.find((line) => line.includes('task completed'))!;
      assert.match(completed, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: task completed /);
      assert.ok(completed.includes(created.task.id));
    }));
});
