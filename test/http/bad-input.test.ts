import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { api, withService, type TestService } from '../helpers/service.js';
import { rawRequest } from '../helpers/raw-http.js';

function rowCounts(service: TestService): Record<string, number> {
  const db = new BetterSqlite3(join(service.dataDir, 'lmsp.db'), { readonly: true });
  try {
    const counts: Record<string, number> = {};
    for (const table of ['responses', 'tasks', 'task_events', 'idempotency_keys']) {
      counts[table] = (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    }
    return counts;
  } finally {
    db.close();
  }
}

interface ErrorBody {
  error: { type: string; code: string; message: string; param: string | null };
}

async function expectError(response: Response, status: number, code: string, param?: string | null): Promise<ErrorBody> {
  assert.equal(response.status, status, `status for ${code}`);
  const body = (await response.json()) as ErrorBody;
  assert.equal(body.error.code, code);
  assert.equal(typeof body.error.message, 'string');
  assert.equal(typeof body.error.type, 'string');
  assert.ok('param' in body.error);
  if (param !== undefined) assert.equal(body.error.param, param);
  return body;
}

describe('bad input gets the documented error, never a 5xx, and writes nothing (LMSP sections 2, 9)', () => {
  test('malformed JSON, wrong types, ranges, sizes and media types', () => withService({}, async (service) => {
    const before = rowCounts(service);
    const post = (body: string | Buffer, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
      api(service, '/v1/responses', { method: 'POST', body, headers });
    await expectError(await post('{"model": "lmsp-tiny", "input": '), 400, 'invalid_json');
    await expectError(await post('[1, 2'), 400, 'invalid_json');
    await expectError(await post('"just a string"'), 400, 'invalid_request');
    await expectError(await post('[]'), 400, 'invalid_request');
    await expectError(await post('{}'), 400, 'invalid_request', 'model');
    await expectError(await post('{"model": "lmsp-tiny"}'), 400, 'invalid_request', 'input');
    const cases: Array<[object, string]> = [
      [{ model: 5, input: 'x' }, 'model'],
      [{ model: 'lmsp-tiny', input: 5 }, 'input'],
      [{ model: 'lmsp-tiny', input: [] }, 'input'],
      [{ model: 'lmsp-tiny', input: [{ role: 'robot', content: 'x' }] }, 'input[0].role'],
      [{ model: 'lmsp-tiny', input: [{ role: 'user' }] }, 'input[0].content'],
      [{ model: 'lmsp-tiny', input: 'x', max_output_tokens: '5' }, 'max_output_tokens'],
      [{ model: 'lmsp-tiny', input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
      [{ model: 'lmsp-tiny', input: 'x', max_output_tokens: 1.5 }, 'max_output_tokens'],
      [{ model: 'lmsp-tiny', input: 'x', temperature: 2.5 }, 'temperature'],
      [{ model: 'lmsp-tiny', input: 'x', temperature: -1 }, 'temperature'],
      [{ model: 'lmsp-tiny', input: 'x', top_p: 1.1 }, 'top_p'],
      [{ model: 'lmsp-tiny', input: 'x', seed: 'abc' }, 'seed'],
      [{ model: 'lmsp-tiny', input: 'x', stream: 'yes' }, 'stream'],
      [{ model: 'lmsp-tiny', input: 'x', background: 1 }, 'background'],
      [{ model: 'lmsp-tiny', input: 'x', on_restart: 'never' }, 'on_restart'],
      [{ model: 'lmsp-tiny', input: 'x', metadata: { a: 1 } }, 'metadata.a'],
      [{ model: 'lmsp-tiny', input: 'x', metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata'],
      [{ model: 'lmsp-tiny', input: 'x', metadata: { ['k'.repeat(65)]: 'v' } }, 'metadata'],
      [{ model: 'lmsp-tiny', input: 'x', metadata: { k: 'v'.repeat(513) } }, 'metadata.k'],
    ];
    for (const [body, param] of cases) await expectError(await post(JSON.stringify(body)), 400, 'invalid_request', param);
    // A key at fault is named as a key, not described as if the object were a long string.
    const longKey = await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', metadata: { ['k'.repeat(65)]: 'v' } })), 400, 'invalid_request', 'metadata');
    assert.equal(longKey.error.message, `Invalid key in 'metadata': '${'k'.repeat(65)}' must NOT have more than 64 characters.`);
    // A wrong type reads as a sentence, a union of types too (not Ajv's `must be integer,null`).
    const seed = await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', seed: 'abc' })), 400, 'invalid_request', 'seed');
    assert.equal(seed.error.message, "Invalid value for 'seed': must be an integer or null.");
    const stream = await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', stream: 'yes' })), 400, 'invalid_request', 'stream');
    assert.equal(stream.error.message, "Invalid value for 'stream': must be a boolean or null.");
    const model = await expectError(await post(JSON.stringify({ model: 5, input: 'x' })), 400, 'invalid_request', 'model');
    assert.equal(model.error.message, "Invalid value for 'model': must be a string.");
    // A field with alternatives names them all, not only the first one tried.
    const input = await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 5 })), 400, 'invalid_request', 'input');
    assert.equal(input.error.message, "Invalid value for 'input': must be a string or an array.");
    const content = await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: [{ role: 'user', content: 5 }] })), 400, 'invalid_request', 'input[0].content');
    assert.equal(content.error.message, "Invalid value for 'input[0].content': must be a string or an array.");
    const role = await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: [{ role: 'bogus', content: 'x' }] })), 400, 'invalid_request', 'input[0].role');
    assert.equal(role.error.message, `Invalid value for 'input[0].role': must be one of "user", "assistant", "system", "developer".`);
    // OpenAI's `include` values are checked; logprobs, which lmsp does not produce, are refused rather than left out.
    await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', include: ['bogus'] })), 400, 'invalid_request', 'include[0]');
    await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', include: ['reasoning.encrypted_content', 'message.output_text.logprobs'] })),
      400, 'invalid_request', 'include[1]');
    await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', top_logprobs: 3 })), 400, 'invalid_request', 'top_logprobs');
    await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', top_logprobs: 21 })), 400, 'invalid_request', 'top_logprobs');
    // OpenAI's conversations and stored prompts would change what the model sees: refused, not ignored.
    await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', conversation: 'conv_abc' })), 400, 'invalid_request', 'conversation');
    await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', conversation: { id: 'conv_abc' } })), 400, 'invalid_request', 'conversation');
    await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', prompt: { id: 'pmpt_1' } })), 400, 'invalid_request', 'prompt');
    const tools = [{ type: 'function', name: 'f' }, { type: 'function', name: 'f' }];
    const twice = await expectError(await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', tools })), 400, 'invalid_request', 'tools[1].name');
    assert.equal(twice.error.message, 'The tool name "f" is used by more than one tool; names must be unique.');
    const chat = await api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'lmsp-tiny', messages: [{ role: 'user', content: [] }] } });
    const empty = await expectError(chat, 400, 'invalid_request', 'messages[0].content');
    // The array is what the client meant: its rule alone, not the other types the field takes.
    assert.equal(empty.error.message, "Invalid value for 'messages[0].content': must not be an empty array.");
    const number = await expectError(await api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'lmsp-tiny', messages: [{ role: 'user', content: 5 }] } }),
      400, 'invalid_request', 'messages[0].content');
    assert.equal(number.error.message, "Invalid value for 'messages[0].content': must be a string, null or an array.");
    // Unknown fields are ignored (LMSP section 2).
    const ignored = await api(service, '/v1/responses', { method: 'POST', json: { model: 'nope', input: 'x', frobnicate: true } });
    await expectError(ignored, 404, 'model_not_found', 'model');
    await expectError(await post('{"model": "lmsp-tiny", "input": "x"}', { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
    await expectError(await post('model=lmsp-tiny', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type');
    // A content coding is refused, not read as if the bytes were plain JSON (RFC 9110 8.4).
    const json = { 'content-type': 'application/json' };
    await expectError(await post(gzipSync('{"model": "lmsp-tiny", "input": "x"}'), { ...json, 'content-encoding': 'gzip' }), 415, 'unsupported_media_type');
    await expectError(await post('{"model": "lmsp-tiny", "input": "x", "max_output_tokens": 1}', { ...json, 'content-encoding': 'br' }), 415, 'unsupported_media_type');
    const huge = JSON.stringify({ model: 'lmsp-tiny', input: 'x'.repeat(1024 * 1024 + 10) });
    await expectError(await post(huge), 413, 'request_too_large');
    assert.deepEqual(rowCounts(service), before, 'no request above wrote anything');
    const identity = await post('{"model": "lmsp-tiny", "input": "x", "max_output_tokens": 1}', { 'content-type': 'application/json', 'content-encoding': 'identity' });
    assert.equal(identity.status, 200, 'the identity coding is no coding');
    // What lmsp has nothing to add for (reasoning, tool results it has no tools for) is accepted, as is top_logprobs 0.
    const harmless = await post(JSON.stringify({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 1, include: ['reasoning.encrypted_content'], top_logprobs: 0, conversation: null, prompt: null }));
    assert.equal(harmless.status, 200, await harmless.clone().text());
  }));

  test('a body that is not UTF-8 is 400 invalid_json, never read with replacement characters (LMSP section 2)', () =>
    withService({}, async (service) => {
      const before = rowCounts(service);
      const bytes = (text: string, inserted: number[]) => {
        const [head, tail] = text.split('|');
        return Buffer.concat([Buffer.from(head!), Buffer.from(inserted), Buffer.from(tail!)]);
      };
      const post = (path: string, body: Buffer) =>
        api(service, path, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      for (const invalid of [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xc0, 0xaf]]) {
        const body = bytes('{"model": "lmsp-tiny", "input": "a|b", "max_output_tokens": 1}', invalid);
        await expectError(await post('/v1/responses', body), 400, 'invalid_json', null);
        await expectError(await post('/v1/pair', bytes('{"code": "AAAA-AAAA", "client_name": "|"}', invalid)), 400, 'invalid_json');
      }
      assert.deepEqual(rowCounts(service), before, 'nothing was written');
      // Well-formed UTF-8 (accents, emoji, a byte order mark) is read as sent.
      const ok = await post('/v1/responses', Buffer.from('\ufeff{"model": "lmsp-tiny", "input": "héllo 🙂", "max_output_tokens": 1, "metadata": {"k": "é🙂"}}'));
      assert.equal(ok.status, 200);
      assert.deepEqual(((await ok.json()) as { metadata: unknown }).metadata, { k: 'é🙂' });
    }));

  test('a string with a lone surrogate escape is 400 naming its field: it is no Unicode text, and would be stored as U+FFFD', () =>
    withService({}, async (service) => {
      const before = rowCounts(service);
      const post = (path: string, text: string) => api(service, path, { method: 'POST', body: Buffer.from(text), headers: { 'content-type': 'application/json' } });
      const cases: Array<[string, string, string]> = [
        ['/v1/responses', '{"model": "lmsp-tiny", "instructions": "\\udc00", "input": "hi", "max_output_tokens": 1}', 'instructions'],
        ['/v1/responses', '{"model": "lmsp-tiny", "input": [{"role": "user", "content": "a\\uD800b"}], "max_output_tokens": 1}', 'input[0].content'],
        ['/v1/responses', '{"model": "lmsp-tiny", "input": "hi", "metadata": {"k\\ud83d": "v"}}', 'metadata.k\\ud83d'],
        ['/v1/chat/completions', '{"model": "lmsp-tiny", "messages": [{"role": "user", "content": "\\ude00 x"}], "max_tokens": 1}', 'messages[0].content'],
        ['/v1/embeddings', '{"model": "lmsp-tiny", "input": ["ok", "\\ud800"]}', 'input[1]'],
      ];
      for (const [path, body, param] of cases) await expectError(await post(path, body), 400, 'invalid_request', param);
      assert.deepEqual(rowCounts(service), before, 'nothing was written');
      // A pair, escaped or not, is the character it encodes.
      const paired = await post('/v1/responses', '{"model": "lmsp-tiny", "instructions": "\\ud83d\\ude00", "input": "\\\\ud800 is text here", "max_output_tokens": 1}');
      assert.equal(paired.status, 200);
      assert.equal(((await paired.json()) as { instructions: string }).instructions, '\u{1F600}');
    }));

  test('unknown ids and routes are 404 not_found on every path', () => withService({}, async (service) => {
    for (const [method, path] of [
      ['GET', '/v1/responses/resp_missing'], ['POST', '/v1/responses/resp_missing/cancel'], ['DELETE', '/v1/responses/resp_missing'],
      ['GET', '/v1/responses/resp_missing/input_items'], ['GET', '/v1/tasks/task_missing'], ['GET', '/v1/tasks/task_missing/events'],
      ['POST', '/v1/tasks/task_missing/cancel'], ['GET', '/v1/nothing-here'], ['DELETE', '/v1/clients/cli_missing'],
    ] as const) {
      await expectError(await api(service, path, { method }), 404, 'not_found');
    }
    await expectError(await api(service, '/v1/models/missing'), 404, 'model_not_found');
    await expectError(await api(service, '/v1/models/missing', { method: 'DELETE' }), 404, 'model_not_found');
    // LMSP 4: every /v1 path needs a token, one that names no route too; elsewhere 404 is for all.
    for (const path of ['/v1/nothing-here', '/v1', '/v1/responses/resp_x/nothing']) {
      const anonymous = await fetch(`${service.url}${path}`);
      assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer', path);
      await expectError(anonymous, 401, 'invalid_token');
      await expectError(await fetch(`${service.url}${path}`, { headers: { authorization: 'Bearer lmsp_wrong' } }), 401, 'invalid_token');
    }
    await expectError(await fetch(`${service.url}/nothing-here`), 404, 'not_found');
    // QUERY may carry a body: without Content-Type Fastify refuses it before any route (LMSP 2: no 5xx).
    for (const path of ['/healthz', '/v1/responses', '/v1/nothing-here']) {
      const query = await rawRequest(service.url, `QUERY ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${service.token}\r\nConnection: close\r\n\r\n`);
      assert.equal(query.status, 404, `QUERY ${path}: ${query.body}`);
      assert.equal((JSON.parse(query.body) as { error: { code: string } }).error.code, 'not_found');
    }
  }));

  test('a larger body limit can be configured', () => withService({ args: ['--body-limit', '4MiB'] }, async (service) => {
    const big = await api(service, '/v1/responses', { method: 'POST', json: { model: 'nope', input: 'x'.repeat(2 * 1024 * 1024) } });
    await expectError(big, 404, 'model_not_found');
  }));
});
