/**
 * A stop (SIGTERM) under load: every request the service was answering gets its answer, so a
 * create committed before the stop is never left with a client that saw a broken connection (and
 * would retry it into a second task); streams end at once, without holding the stop.
 */
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { ResponseObject } from '../../src/api/types.js';
import { api, waitFor, withService, type TestService } from '../helpers/service.js';

interface Outcome {
  status: number | null;
  id: string | null;
  error: string | null;
}

/** One background create over a kept-alive connection of `agent`. */
function create(url: string, token: string, agent: Agent): Promise<Outcome> {
  const body = JSON.stringify({ model: 'lmsp-tiny', input: 'hi', background: true, max_output_tokens: 1 });
  return new Promise((resolve) => {
    const sent = request(`${url}/v1/responses`, {
      method: 'POST', agent,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (answer) => {
      let text = '';
      answer.setEncoding('utf8');
      answer.on('data', (chunk: string) => (text += chunk));
      answer.on('end', () => {
        const id = answer.statusCode === 202 ? (JSON.parse(text) as ResponseObject).id : null;
        resolve({ status: answer.statusCode ?? null, id, error: null });
      });
      answer.on('error', (error) => resolve({ status: answer.statusCode ?? null, id: null, error: error.message }));
    });
    sent.on('error', (error: NodeJS.ErrnoException) => resolve({ status: null, id: null, error: error.code ?? error.message }));
    sent.end(body);
  });
}

/**
 * Starts the runner (its process takes seconds to start on a loaded machine) and registers a
 * copy of the model, whose load, the next one, then takes the debug load delay and little else.
 */
async function warmRunner(service: TestService): Promise<void> {
  assert.equal((await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'lmsp-tiny', input: 'warm' } })).status, 200);
  copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'copy.gguf'));
  assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'copy.gguf', id: 'copy' } })).status, 201);
}

describe('a stop under load', () => {
  test('every create the service committed was answered 202, and nothing was answered but 202', { timeout: 120_000 }, () =>
    withService({ args: ['--max-unfinished-tasks-per-client', '100000'] }, async (service) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 16 });
      const outcomes: Outcome[] = [];
      let stopped = false;
      const worker = async () => {
        for (;;) {
          const outcome = await create(service.url, service.token, agent);
          outcomes.push(outcome);
          if (outcome.status === null || stopped && outcome.error !== null) return;
        }
      };
      const workers = Array.from({ length: 16 }, worker);
      await waitFor(() => outcomes.filter((outcome) => outcome.status === 202).length >= 200, { what: '200 creates answered' });
      stopped = true;
      await service.stop();
      await Promise.all(workers);
      agent.destroy();
      assert.equal(service.child.exitCode, 0, service.output());

      const answered = outcomes.filter((outcome) => outcome.status !== null);
      assert.deepEqual([...new Set(answered.map((outcome) => outcome.status))], [202], 'a request the stop caught was answered as any other');
      // What never reached the service, or reached it as it closed its connections, is a
      // connection error: the client may retry it, as nothing was made.
      for (const outcome of outcomes.filter((each) => each.status === null)) assert.match(outcome.error ?? '', /ECONNRESET|ECONNREFUSED|EPIPE|socket hang up/);

      const again = await service.restart();
      const stored = new Set<string>();
      let after: string | null = null;
      for (;;) {
        const page = (await (await api(again, `/v1/tasks?limit=1000${after ? `&after=${after}` : ''}`)).json()) as { data: { response_id: string }[]; has_more: boolean; last_id: string };
        for (const task of page.data) stored.add(task.response_id);
        if (!page.has_more) break;
        after = page.last_id;
      }
      const accepted = new Set(answered.map((outcome) => outcome.id!));
      assert.deepEqual([...stored].filter((id) => !accepted.has(id)), [], 'no task was committed without its 202 reaching the client');
      assert.deepEqual([...accepted].filter((id) => !stored.has(id)), [], 'every 202 is on disk');
    }));

  test('an embedding being computed is answered before the service stops', { timeout: 60_000 }, () =>
    // Its model takes 2 s to load: the stop comes meanwhile.
    withService({ env: { LMSP_DEBUG_LOAD_DELAY_MS: '2000' } }, async (service) => {
      await warmRunner(service);
      const asked = api(service, '/v1/embeddings', { method: 'POST', json: { model: 'copy', input: ['one', 'two'] } });
      await new Promise((resolve) => setTimeout(resolve, 500));
      const stopped = service.stop();
      const answer = await asked;
      assert.equal(answer.status, 200);
      assert.equal(((await answer.json()) as { data: unknown[] }).data.length, 2);
      await stopped;
      assert.equal(service.child.exitCode, 0, service.output());
    }));

  test('a plain create that reaches a stopping service is refused before anything is written, not committed and cut off', { timeout: 60_000 }, () =>
    // An embedding whose model takes 4 s to load keeps the connection busy through the stop; the
    // create comes behind it on the same connection once the stop has begun.
    withService({ env: { LMSP_DEBUG_LOAD_DELAY_MS: '4000', LMSP_LOG_LEVEL: 'info' } }, async (service) => {
      await warmRunner(service);
      const { port } = new URL(service.url);
      const socket = connect(Number(port), '127.0.0.1');
      let received = '';
      socket.setEncoding('latin1');
      socket.on('data', (chunk: string) => (received += chunk));
      const closed = new Promise((resolve) => socket.on('close', resolve));
      const post = (path: string, body: object) => {
        const text = JSON.stringify(body);
        return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${service.token}\r\n`
          + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
      };
      socket.write(post('/v1/embeddings', { model: 'copy', input: 'first' }));
      // Time for the embedding to be read and its load to begin, on a busy machine too.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const stopped = service.stop();
      await waitFor(() => /"msg":"stopping: /.test(service.output()), { timeoutMs: 10_000, what: 'the stop to begin' });
      socket.write(post('/v1/responses', { model: 'lmsp-tiny', input: 'behind', max_output_tokens: 3 }));
      await Promise.all([closed, stopped]);
      // The embedding is answered, and its connection closed after it: the create behind it gets
      // no answer (a client sends it again on a new connection), and nothing was made for it.
      const statuses = [...received.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((match) => Number(match[1]));
      assert.deepEqual(statuses, [200], received);
      assert.match(received, /^connection: close\r$/m);
      assert.match(service.output(), /"url":"\/v1\/responses","msg":"refused: the service is stopping"/);
      const again = await service.restart();
      assert.deepEqual((await again.client.listTasks()).data, [], 'no task was made for it');
    }));

  test('open event streams end at once: they do not hold the stop for its grace period', { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '50' } }, async (service) => {
      const created = (await (await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'hi', background: true, max_output_tokens: 1000 } })).json()) as ResponseObject;
      const streams = await Promise.all([1, 2, 3].map(() => api(service, `/v1/responses/${created.id}?stream=true`)));
      for (const stream of streams) assert.equal(stream.status, 200);
      const ended = streams.map(async (stream) => {
        try {
          await stream.text();
          return 'ended';
        } catch {
          return 'cut';
        }
      });
      const started = Date.now();
      await service.stop();
      const took = Date.now() - started;
      assert.equal(service.child.exitCode, 0, service.output());
      assert.deepEqual(await Promise.all(ended), ['ended', 'ended', 'ended'], 'each stream ended cleanly, to be resumed from its last event');
      assert.ok(took < 4_000, `the stop took ${took} ms, as long as its grace period`);
    }));
});
