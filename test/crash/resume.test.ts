/**
 * Exact resume (LMSP 7.5): a task killed with SIGKILL mid-generation and resumed after a restart
 * ends with exactly the text of an uninterrupted run, and its deltas concatenate to that text.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { CreateResponseBody, TaskEvent } from '../../src/api/types.js';
import { waitFor, withService, type TestService } from '../helpers/service.js';

const MAX_TOKENS = 300;

function request(sampling: Partial<CreateResponseBody>): CreateResponseBody {
  return {
    model: 'lmsp-tiny',
    instructions: 'You are terse.',
    input: [{ role: 'user', content: 'Tell me a long story about a lighthouse.' }, { role: 'assistant', content: 'Once' }, { role: 'user', content: 'Go on.' }],
    max_output_tokens: MAX_TOKENS,
    ...sampling,
  };
}

async function textOf(service: TestService, responseId: string): Promise<string> {
  return (await service.client.getResponse(responseId)).output[0]!.content[0]!.text;
}

async function deltasOf(service: TestService, taskId: string): Promise<{ text: string; events: TaskEvent[] }> {
  const events: TaskEvent[] = [];
  let after = 0;
  for (;;) {
    const page = await service.client.taskEvents(taskId, after, 1000);
    events.push(...page.data);
    if (!page.has_more) break;
    after = page.data.at(-1)!.sequence_number;
  }
  return { text: events.filter((event) => event.type === 'response.output_text.delta').map((event) => event.delta).join(''), events };
}

/** Runs `body` in the background, kills the service once `killAt` tokens are committed, resumes. */
async function killAndResume(service: TestService, body: CreateResponseBody, killAt: number,
  options: { dropStates?: boolean; damageStates?: boolean } = {}): Promise<{ service: TestService; text: string; resumedFrom: number }> {
  const created = await service.client.createResponse({ ...body, background: true, on_restart: 'resume' });
  await waitFor(async () => ((await service.client.getResponse(created.body.id)).usage?.output_tokens ?? 0) >= killAt, { what: `${killAt} tokens` });
  if (options.damageStates) {
    // Wait for a saved state, so that there is one to damage.
    await waitFor(() => readdirSync(join(service.dataDir, 'state')).some((name) => name.endsWith('.state')), { what: 'a saved state' });
  }
  await service.kill();
  if (options.dropStates) rmSync(join(service.dataDir, 'state'), { recursive: true, force: true });
  if (options.damageStates) {
    // As a disk error or a power cut could: the layout llama.cpp checks is intact, some of the
    // cached values are zeros.
    for (const name of readdirSync(join(service.dataDir, 'state')).filter((file) => file.endsWith('.state'))) {
      const path = join(service.dataDir, 'state', name);
      const bytes = readFileSync(path);
      bytes.fill(0, bytes.length - 2000, bytes.length - 1000);
      writeFileSync(path, bytes);
    }
  }
  // Same options, token delay included: the next kill point is taken on this service, and without
  // the delay a generation can finish before the SIGKILL lands.
  const restarted = await service.restart();
  const final = await waitFor(async () => {
    const response = await restarted.client.getResponse(created.body.id);
    return response.task.status === 'completed' ? response : null;
  }, { what: 'the resumed task to complete' });
  const { text: deltas, events } = await deltasOf(restarted, created.body.task.id);
  const resumed = events.find((event) => event.type === 'response.resumed');
  assert.ok(resumed, `the task was resumed, not restarted (killed at ${killAt}; events: ${events.map((event) => event.type).filter((type) => type !== 'response.output_text.delta').join(', ')})`);
  assert.equal(final.task.attempt, 1);
  assert.equal(final.usage?.output_tokens, MAX_TOKENS);
  assert.equal(deltas, final.output[0]!.content[0]!.text, 'the concatenated deltas are the text: nothing lost or repeated');
  events.forEach((event, index) => assert.equal(event.sequence_number, index + 1));
  return { service: restarted, text: final.output[0]!.content[0]!.text, resumedFrom: resumed.output_tokens as number };
}

describe('exact resume after SIGKILL (LMSP 7.5)', () => {
  for (const [name, sampling] of [['seeded sampling', { temperature: 1, seed: 424242 }], ['temperature 0', { temperature: 0 }]] as const) {
    test(`${name}: identical text for several kill points`, { timeout: 180_000 }, () =>
      withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '8' } }, async (first) => {
        // The uninterrupted run, for reference, with the same service and model.
        const reference = await first.client.createResponse(request(sampling));
        const expected = await textOf(first, reference.body.id);
        assert.equal(reference.body.usage?.output_tokens, MAX_TOKENS);
        let service = first;
        const resumedFrom: number[] = [];
        for (const killAt of [2, 90, 240]) {
          const outcome = await killAndResume(service, request(sampling), killAt);
          service = outcome.service;
          resumedFrom.push(outcome.resumedFrom);
          assert.equal(outcome.text, expected, `resumed after ${outcome.resumedFrom} tokens: the same text as an uninterrupted run`);
        }
        assert.ok(resumedFrom[0]! < resumedFrom[1]! && resumedFrom[1]! < resumedFrom[2]!, `kill points ${resumedFrom.join(', ')}`);
      }));
  }

  test('without saved states, the resume replays the committed tokens and is still exact', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '8' } }, async (service) => {
      const body = request({ temperature: 0.8, top_p: 0.9, seed: 7 });
      const expected = await textOf(service, (await service.client.createResponse(body)).body.id);
      const outcome = await killAndResume(service, body, 150, { dropStates: true });
      assert.equal(outcome.text, expected);
    }));

  test('a restart keeps the saved state and its digest of a task it resumes', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '8' } }, async (service) => {
      const created = await service.client.createResponse({ ...request({ seed: 5 }), background: true, on_restart: 'resume' });
      const stateDir = join(service.dataDir, 'state');
      const saved = [`${created.body.task.id}.state`, `${created.body.task.id}.state.sha256`];
      await waitFor(() => saved.every((name) => readdirSync(stateDir).includes(name)), { what: 'a saved state and its digest' });
      await service.kill();
      // The resumed task waits for its model, so its files are seen as the startup left them.
      const restarted = await service.restart({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '8', LMSP_DEBUG_LOAD_DELAY_MS: '3000' } });
      const kept = readdirSync(stateDir);
      assert.ok(saved.every((name) => kept.includes(name)), `kept: ${kept.join(', ')}`);
      await waitFor(async () => (await restarted.client.getResponse(created.body.id)).task.status === 'completed', { what: 'the resumed task to complete' });
    }));

  test('a saved state damaged on disk is not resumed from: the committed tokens are replayed and the text is still exact', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '8' } }, async (service) => {
      const body = request({ temperature: 1, seed: 777 });
      const expected = await textOf(service, (await service.client.createResponse(body)).body.id);
      const outcome = await killAndResume(service, body, 150, { damageStates: true });
      assert.equal(outcome.text, expected);
    }));
});
