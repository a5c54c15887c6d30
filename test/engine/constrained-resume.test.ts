/**
 * LMSP 6.1 and 7.5: a constrained generation whose runner dies resumes from its committed
 * tokens in a fresh runner under the same grammar, and ends exactly as an uninterrupted run.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { GenerateRequest, OutputUnit } from '../../src/engine/engine.js';
import type { RunnerPool } from '../../src/engine/runner-pool.js';
import { callArguments, runGeneration, sampling, withEngine } from '../helpers/engine.js';
import { schemaViolation } from '../helpers/schema-validator.js';
import { childPids } from '../helpers/service.js';
import type { ModelRef } from '../../src/engine/engine.js';

const ROWS_SCHEMA = {
  type: 'object',
  properties: {
    rows: {
      type: 'array', minItems: 6, maxItems: 6,
      items: {
        type: 'object',
        properties: { name: { type: 'string', minLength: 4, maxLength: 10 }, score: { type: 'integer', minimum: 0, maximum: 100 }, ok: { type: 'boolean' } },
        required: ['name', 'score', 'ok'], additionalProperties: false,
      },
    },
  },
  required: ['rows'], additionalProperties: false,
};

type Request = Omit<GenerateRequest, 'taskId' | 'resumeTokens'>;

/** Runs `request`, kills the runner once `fraction` of `expectedTokens` arrived, and resumes. */
async function killAndResume(engine: RunnerPool, model: ModelRef, request: Request, expectedTokens: number, fraction: number, taskId: string) {
  const committed: OutputUnit[] = [];
  let killed = false;
  await assert.rejects(runGeneration(engine, model, { ...request, taskId }, {
    onUnit: (unit, all) => {
      committed.push(unit);
      if (!killed && all.flatMap((u) => u.tokens).length >= expectedTokens * fraction) {
        killed = true;
        for (const pid of childPids(process.pid)) process.kill(pid, 'SIGKILL');
      }
    },
  }), { name: 'EngineExited' });
  const resumeTokens = committed.flatMap((unit) => unit.tokens);
  assert.ok(resumeTokens.length > 0 && resumeTokens.length < expectedTokens, `killed mid-way (${resumeTokens.length} of ${expectedTokens})`);
  const resumed = await runGeneration(engine, model, { ...request, taskId, resumeTokens });
  return { committed, resumed, units: [...committed, ...resumed.units] };
}

describe('constrained decoding across a resume (LMSP 6.1, 7.5)', () => {
  test('a long JSON generation killed mid-way ends, resumed, exactly as an uninterrupted run, valid against its schema', { timeout: 180_000 }, () =>
    withEngine({ tokenDelayMs: 10 }, async ({ engine, tiny }) => {
      const request: Request = { messages: [{ role: 'user', content: 'Six rows.' }], sampling: sampling(11, 1200), format: { type: 'json_schema', schema: ROWS_SCHEMA } };
      const uninterrupted = await runGeneration(engine, tiny, request);
      assert.equal(uninterrupted.finishReason, 'stop');
      assert.equal(schemaViolation(ROWS_SCHEMA, uninterrupted.text), null, uninterrupted.text);
      for (const fraction of [0.3, 0.7]) {
        const { committed, resumed } = await killAndResume(engine, tiny, request, uninterrupted.tokens.length, fraction, `task_json_${fraction}`);
        const text = committed.map((unit) => unit.text).join('') + resumed.text;
        assert.equal(resumed.finishReason, 'stop');
        assert.equal(text, uninterrupted.text);
        assert.deepEqual([...committed.flatMap((unit) => unit.tokens), ...resumed.tokens], uninterrupted.tokens);
        assert.equal(schemaViolation(ROWS_SCHEMA, text), null);
      }
    }));

  test('forced parallel tool calls killed mid-way resume to the same calls', { timeout: 180_000 }, () =>
    withEngine({ tokenDelayMs: 10 }, async ({ engine, tiny }) => {
      const parameters = { type: 'object', properties: { city: { type: 'string', minLength: 3, maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'days'], additionalProperties: false };
      const request: Request = {
        messages: [{ role: 'user', content: 'Weather?' }], sampling: sampling(4, 400),
        tools: [{ name: 'forecast', parameters }], toolChoice: 'required', parallelToolCalls: true,
      };
      const uninterrupted = await runGeneration(engine, tiny, request);
      assert.ok(uninterrupted.toolCalls && uninterrupted.toolCalls.length > 0);
      const { units, resumed } = await killAndResume(engine, tiny, request, uninterrupted.tokens.length, 0.5, 'task_calls');
      assert.deepEqual(resumed.toolCalls, uninterrupted.toolCalls, 'the calls reported at the end include those before the resume');
      assert.deepEqual(callArguments(units), callArguments(uninterrupted.units), 'the streamed arguments add up to the same calls');
      for (const call of resumed.toolCalls!.filter((c) => c.status === 'completed')) assert.equal(schemaViolation(parameters, call.arguments), null);
    }));
});
