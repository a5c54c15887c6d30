/**
 * The count of an input's tokens before a create is stored (LMSP 6, 13: 400
 * context_length_exceeded before anything is written) is one client's work: it must not stall or
 * end the generations of others (LMSP 16), and an input far longer than any context is told apart
 * without tokenizing it, which is not linear in every input (a run of one letter grows with its
 * square in llama.cpp's tokenizer: 900 KB of it take more than a minute).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { writeGgufFile } from '../../src/engine/gguf-writer.js';
import { buildSyntheticModel, LMSP_TINY } from '../../src/engine/synthetic-model.js';
import { api, errorOf, waitFor, withService, type TestService } from '../helpers/service.js';

/** A background response that runs for a few seconds on `model`, once it is generating. */
async function longGeneration(service: TestService, model: string): Promise<string> {
  const created = await service.client.createResponse({ model, input: 'hi', background: true, max_output_tokens: 150, on_restart: 'fail' });
  await waitFor(async () => ((await service.client.getResponse(created.body.id)).usage?.output_tokens ?? 0) > 3, { what: 'the generation to start' });
  return created.body.id;
}

/** The response ran to its limit, in its first attempt, with no failure in its log. */
async function assertUndisturbed(service: TestService, responseId: string): Promise<void> {
  const finished = await waitFor(async () => {
    const response = await service.client.getResponse(responseId);
    return response.status === 'in_progress' || response.status === 'queued' ? null : response;
  }, { timeoutMs: 60_000, what: 'the generation to finish' });
  assert.equal(finished.status, 'incomplete', JSON.stringify(finished.error));
  assert.equal(finished.usage?.output_tokens, 150);
  assert.equal(finished.task.attempt, 1);
}

describe('counting an input before its create', () => {
  test('an input far longer than the context is refused at once with the tokens it has at least; a generation of the same model goes on', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20', LMSP_DEBUG_RENDER_DEADLINE_MS: '3000' } }, async (service) => {
      const running = await longGeneration(service, 'lmsp-tiny');
      const huge = 'x'.repeat(900_000);
      const chat = await api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'lmsp-tiny', messages: [{ role: 'user', content: huge }], max_tokens: 3 } });
      assert.equal(chat.status, 400);
      const chatError = await errorOf(chat);
      assert.equal(chatError.code, 'context_length_exceeded');
      assert.equal(chatError.param, 'messages');
      assert.match(chatError.message, /^The messages \(at least \d+ tokens\) and max_tokens \(3\) exceed the context length of 'lmsp-tiny' \(16384 tokens\)\.$/);
      assert.equal(chat.headers.get('lmsp-task-id'), null, 'no task was written');
      const response = await api(service, '/v1/responses', { method: 'POST', json: { model: 'lmsp-tiny', input: huge, max_output_tokens: 3 } });
      assert.equal(response.status, 400);
      const responseError = await errorOf(response);
      assert.equal(responseError.code, 'context_length_exceeded');
      assert.equal(responseError.param, 'input');
      assert.match(responseError.message, /^The input \(at least \d+ tokens\)/);
      // Any message, not only the user's: instructions, a system message, a tool's output.
      for (const [path, body] of [
        ['/v1/responses', { model: 'lmsp-tiny', instructions: huge, input: 'hi', max_output_tokens: 3 }],
        ['/v1/chat/completions', { model: 'lmsp-tiny', messages: [{ role: 'system', content: huge }, { role: 'user', content: 'hi' }], max_tokens: 3 }],
        ['/v1/chat/completions', { model: 'lmsp-tiny', max_tokens: 3, messages: [{ role: 'user', content: 'hi' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: huge }], tools: [{ type: 'function', function: { name: 'f' } }] }],
        // And what is written whole beside the messages: a call's arguments, a tool's description or parameters.
        ['/v1/responses', { model: 'lmsp-tiny', max_output_tokens: 3, tools: [{ type: 'function', name: 'f', description: huge }], tool_choice: 'none', input: 'hi' }],
        ['/v1/responses', { model: 'lmsp-tiny', max_output_tokens: 3, tools: [{ type: 'function', name: 'f' }], input: [
          { type: 'function_call', call_id: 'c1', name: 'f', arguments: huge }, { type: 'function_call_output', call_id: 'c1', output: 'ok' }] }],
        ['/v1/chat/completions', { model: 'lmsp-tiny', max_tokens: 3, messages: [{ role: 'user', content: 'hi' }],
          tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'string', description: huge } } } } }] }],
      ] as const) {
        const refused = await api(service, path, { method: 'POST', json: body });
        assert.equal(refused.status, 400, path);
        assert.match((await errorOf(refused)).message, /\(at least \d+ tokens\)/, path);
      }
      await assertUndisturbed(service, running);
      // Nothing but the one generation was ever written.
      assert.equal((await service.client.listTasks({})).data.length, 1);
    }));

  test('an embeddings input far longer than the context is refused at once, and the generation on the same runner goes on', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20', LMSP_DEBUG_RENDER_DEADLINE_MS: '3000' } }, async (service) => {
      const running = await longGeneration(service, 'lmsp-tiny');
      const embedded = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'lmsp-tiny', input: ['fine', 'x'.repeat(900_000)] } });
      assert.equal(embedded.status, 400);
      const error = await errorOf(embedded);
      assert.equal(error.code, 'context_length_exceeded');
      assert.equal(error.param, 'input[1]');
      assert.match(error.message, /^input\[1\] has at least \d+ tokens; the model's context is 16384$/);
      await assertUndisturbed(service, running);
    }));

  test('a count that never ends ends the tokenizer, not the runner generating with the same model', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20', LMSP_DEBUG_RENDER_DEADLINE_MS: '3000' } }, async (service) => {
      // A template that renders a short conversation at once and never ends on a long one.
      const template = '{% if messages|length > 8 %}{% for a in range(100000) %}{% for b in range(100000) %}{{ "x" }}{% endfor %}{% endfor %}{% endif %}'
        + "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
      writeGgufFile(join(service.dataDir, 'models', 'slow.gguf'), buildSyntheticModel({ ...LMSP_TINY, name: 'slow', chatTemplate: template }));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'slow.gguf', id: 'slow' } })).status, 201);
      const running = await longGeneration(service, 'slow');
      // Asking for nearly the whole context makes the create count its nine messages first.
      const messages = Array.from({ length: 9 }, (_, index) => ({ role: index % 2 === 0 ? 'user' : 'assistant', content: `turn ${index}` }));
      const stuck = await api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'slow', messages, max_tokens: 16_300 } });
      // The count gave up, so the task checked the input itself, and failed alone.
      assert.equal(stuck.status, 500);
      assert.match((await errorOf(stuck)).message, /did not render the prompt within 3 s/);
      await assertUndisturbed(service, running);
      // The tokenizer starts again for the next count.
      const counted = await api(service, '/v1/chat/completions', { method: 'POST', json: { model: 'lmsp-tiny', messages: [{ role: 'user', content: 'word '.repeat(4000) }], max_tokens: 16_000 } });
      assert.equal(counted.status, 400);
      assert.match((await errorOf(counted)).message, /^The messages \(\d+ tokens\)/);
    }));
});
