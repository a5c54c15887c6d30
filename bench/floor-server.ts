/**
 * The floor of the durable-create benchmark: a bare Fastify route that writes, for each request,
 * the same rows an lmsp create writes (the response, its task, its `response.created` event,
 * through lmsp's own store, schema and group commit, `synchronous = FULL`) and answers 202 after
 * the commit with the response object, but does nothing else an lmsp create does (no Host or
 * token check, no schema validation, no idempotency look-up, no model or context checks, no
 * metrics). Between the bare route and this floor is what durability costs; between this floor
 * and lmsp is what everything else costs. Prints its URL as one JSON line.
 *
 * With the argument `--auto-vacuum-none` its database is rewritten without the incremental
 * `auto_vacuum` that new lmsp databases have, so the benchmark can tell what keeping that
 * (pointer-map pages updated as pages are allocated) costs a create.
 */
import { mkdtempSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { toResponseObject } from '../src/api/views.js';
import type { StoredResponse } from '../src/domain/responses.js';
import { newId } from '../src/ids.js';
import { DATABASE_FILE } from '../src/store/db.js';
import { Store } from '../src/store/index.js';
import { newTaskMachine } from '../src/tasks/core.js';
import { newResponseTask } from '../src/tasks/prepare-response.js';
import { nowSeconds } from '../src/time.js';

const dataDir = mkdtempSync(join(tmpdir(), 'lmsp-bench-floor-'));
if (process.argv.includes('--auto-vacuum-none')) {
  await Store.open(dataDir).close();
  const sqlite = new BetterSqlite3(join(dataDir, DATABASE_FILE));
  sqlite.pragma('auto_vacuum = NONE');
  sqlite.exec('VACUUM');
  if (sqlite.pragma('auto_vacuum', { simple: true }) !== 0) throw new Error('the floor database kept its auto_vacuum');
  sqlite.close();
}
const store = Store.open(dataDir);
const machine = newTaskMachine(store);
const clientId = newId('cli');
// A live client, as lmsp's creates check inside their transaction (LMSP 4: a revoke stops a token at once).
store.clients.insert({ id: clientId, name: 'floor', scopes: ['responses'], kind: 'paired', createdAt: nowSeconds(), lastUsedAt: null, revokedAt: null },
  Buffer.alloc(32));

const app = Fastify({ bodyLimit: 1024 * 1024 });
app.post('/v1/responses', async (request, reply) => {
  const body = request.body as { model: string; input: string; max_output_tokens: number; background: boolean };
  const response: StoredResponse = {
    id: newId('resp'), clientId, model: body.model, createdAt: nowSeconds(), background: body.background, stream: false, store: true,
    instructions: null, previousResponseId: null, maxOutputTokens: body.max_output_tokens, temperature: 1, topP: 1, seed: 1234,
    metadata: {},
    inputItems: [{ id: newId('msg'), type: 'message', role: 'user', status: 'completed', content: [{ type: 'input_text', text: body.input }] }],
    context: [{ role: 'user', content: body.input }],
    outputItemId: newId('msg'), outputText: null,
  };
  const outcome = await store.createTask(null, {
    prepare: () => newResponseTask(response, 'resume'),
    command: (task) => {
      const { task: created, events } = machine.draftCreate(task, response);
      return { record: { kind: 'response', response }, task: created, events, cap: null, key: null, recording: null };
    },
  });
  if (!('task' in outcome)) throw new Error('a create of a live client without a key or a cap is always written');
  return reply.code(202).header('location', `/v1/responses/${response.id}`).send(toResponseObject(response, outcome.task, ''));
});
const url = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ url })}\n`);
