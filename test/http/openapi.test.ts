/**
 * /openapi.json describes the API that runs: a client generated from it must expect the statuses
 * the routes answer (201 for what a POST creates, 202 for what it queues) and the one error shape.
 */
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { api, withService } from '../helpers/service.js';

interface Operation {
  parameters?: Array<{ in: string; name: string }>;
  responses: Record<string, { description: string; content?: Record<string, { schema: { properties?: Record<string, unknown> } }> }>;
}

describe('the OpenAPI document', () => {
  test("every operation lists the statuses its route answers, and every error's shape", { timeout: 60_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
      const document = (await (await fetch(`${service.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, Operation>> };
      const documented = (path: string, method: string) => {
        const operation = document.paths[path]?.[method];
        assert.ok(operation, `${method} ${path} is documented`);
        return Object.keys(operation.responses);
      };
      for (const [path, operations] of Object.entries(document.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          const error = operation.responses.default?.content?.['application/json']?.schema;
          assert.ok(error?.properties?.error, `${method} ${path} documents its errors`);
        }
      }

      // What the routes answer, and what the document says they do.
      const seen: Array<[string, string, number]> = [];
      const call = async (path: string, documentedPath: string, init: Parameters<typeof api>[2] & { method: string }) => {
        const answer = await api(service, path, init);
        seen.push([documentedPath, init.method.toLowerCase(), answer.status]);
        return answer;
      };
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'copy.gguf'));
      await call('/v1/models', '/v1/models', { method: 'POST', json: { path: 'copy.gguf' } });
      await call('/v1/pairing-codes', '/v1/pairing-codes', { method: 'POST', json: {} });
      const background = await call('/v1/responses', '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', background: true, max_output_tokens: 500 } });
      const { id } = (await background.json()) as { id: string };
      await call(`/v1/responses/${id}/cancel`, '/v1/responses/{id}/cancel', { method: 'POST' });
      await call('/v1/responses', '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 } });
      await call('/v1/chat/completions', '/v1/chat/completions', { method: 'POST', json: { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 } });
      assert.deepEqual(seen.map(([, , status]) => status).slice(0, 3), [201, 201, 202]);
      for (const [path, method, status] of seen) {
        assert.ok(documented(path, method).includes(String(status)), `${method} ${path} answered ${status}, documented ${documented(path, method).join(', ')}`);
      }
      assert.deepEqual(documented('/v1/models/pull', 'post'), ['202', 'default']);
      assert.deepEqual(documented('/v1/pair', 'post'), ['201', 'default']);
      assert.deepEqual(documented('/v1/tasks/{id}/cancel', 'post'), ['200', '202', 'default']);
      assert.deepEqual(documented('/v1/models', 'get'), ['200', 'default']);
      // What may answer with server-sent events says so.
      for (const [path, method] of [['/v1/responses', 'post'], ['/v1/chat/completions', 'post'], ['/v1/responses/{id}', 'get'], ['/v1/tasks/{id}/events', 'get']]) {
        assert.deepEqual(Object.keys(document.paths[path]![method]!.responses['200']!.content ?? {}).sort(), ['application/json', 'text/event-stream'], `${method} ${path}`);
      }
      assert.deepEqual(Object.keys(document.paths['/v1/models']!.get!.responses['200']!.content ?? {}), ['application/json'], 'a plain answer is JSON alone');
      // The headers the routes read: Idempotency-Key on every POST, Last-Event-ID where a GET streams.
      const headersOf = (path: string, method: string) => (document.paths[path]![method]!.parameters ?? [])
        .filter((parameter) => parameter.in === 'header').map((parameter) => parameter.name.toLowerCase());
      for (const [path, operations] of Object.entries(document.paths)) {
        if (operations.post) assert.ok(headersOf(path, 'post').includes('idempotency-key'), `POST ${path} documents Idempotency-Key`);
      }
      for (const path of ['/v1/responses/{id}', '/v1/tasks/{id}/events']) assert.deepEqual(headersOf(path, 'get'), ['last-event-id'], `GET ${path}`);
      assert.deepEqual(headersOf('/v1/models', 'get'), [], 'a GET that does not stream reads neither');
    }));
});
