import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { getLlama, LlamaLogLevel, type Token } from 'node-llama-cpp';
import type { OutputUnit } from '../../src/engine/engine.js';
import { OutputShaper } from '../../src/engine/output-shaper.js';
import { OutputSplitter } from '../../src/engine/output-splitter.js';
import { PLAIN_TOOL_CALL_SYNTAX } from '../../src/engine/plain-layout.js';
import { LMSP_TINY } from '../../src/engine/synthetic-model.js';
import type { ToolDefinition } from '../../src/engine/types.js';
import { callArguments, runGeneration, sampling, withEngine } from '../helpers/engine.js';
import { schemaViolation } from '../helpers/schema-validator.js';
import { CHATML_CONTROL_TOKENS, CHATML_TOOLS_TEMPLATE } from '../helpers/templates.js';

const WEATHER: ToolDefinition = {
  name: 'get_weather',
  description: 'Current weather',
  parameters: { type: 'object', properties: { city: { type: 'string', minLength: 2, maxLength: 12 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false },
};
const ADD: ToolDefinition = {
  name: 'add',
  parameters: { type: 'object', properties: { a: { type: 'integer', minimum: -99, maximum: 99 }, b: { type: 'integer', minimum: -99, maximum: 99 } }, required: ['a', 'b'], additionalProperties: false },
};
const TOOLS = [WEATHER, ADD];
const messages = [{ role: 'user' as const, content: 'Use the tools.' }];

function parametersOf(name: string): Record<string, unknown> {
  return TOOLS.find((tool) => tool.name === name)!.parameters!;
}

/** Feeds text in pieces of `size` characters through a shaper and returns the units. */
function split(text: string, layout: ConstructorParameters<typeof OutputSplitter>[0], size: number): { units: OutputUnit[]; splitter: OutputSplitter } {
  const splitter = new OutputSplitter(layout, PLAIN_TOOL_CALL_SYNTAX, TOOLS.map((tool) => tool.name), []);
  const shaper = new OutputShaper(splitter);
  const units: OutputUnit[] = [];
  for (let at = 0, token = 1; at < text.length; at += size, token++) {
    const unit = shaper.push({ text: text.slice(at, at + size), tokens: [token] });
    if (unit) units.push(unit);
  }
  const last = shaper.finish();
  if (last) units.push(last);
  return { units, splitter };
}

describe('tool calls (LMSP 6.2)', () => {
  test('reading calls back: text, then calls, split at any token boundary', () => {
    const text = 'Let me look.<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}</tool_call>\n'
      + '<tool_call>{"name": "add", "arguments": {"a": 2, "b": -3}}</tool_call>';
    for (const size of [1, 2, 3, 7, 50, text.length]) {
      const { units, splitter } = split(text, 'text-then-calls', size);
      assert.equal(units.map((unit) => unit.text).join(''), 'Let me look.', `content, pieces of ${size}`);
      assert.deepEqual(callArguments(units), [
        { name: 'get_weather', arguments: '{"city": "Oslo", "unit": "c"}' },
        { name: 'add', arguments: '{"a": 2, "b": -3}' },
      ]);
      assert.deepEqual(splitter.toolCalls().map((call) => call.status), ['completed', 'completed']);
      assert.equal(units.flatMap((unit) => unit.tokens).length, Math.ceil(text.length / size), 'every token is reported once');
    }
    const cut = split(text.slice(0, 73), 'text-then-calls', 4);
    assert.deepEqual(cut.splitter.toolCalls(), [{ name: 'get_weather', arguments: '{"city": "Osl', status: 'incomplete' }]);
    const almost = split('a <tool_cal', 'text-then-calls', 1);
    assert.equal(almost.units.map((unit) => unit.text).join(''), 'a <tool_cal', 'a prefix that never completes is text');
  });

  test('required: lmsp-tiny writes only calls, each of a listed tool with valid arguments', { timeout: 120_000 }, () => withEngine({}, async ({ engine, tiny }) => {
    for (const seed of [1, 2, 3]) {
      const result = await runGeneration(engine, tiny, { messages, sampling: sampling(seed, 600), tools: TOOLS, toolChoice: 'required' });
      assert.equal(result.text, '', 'no message content');
      assert.ok(result.toolCalls && result.toolCalls.length >= 1);
      const complete = result.toolCalls.filter((call) => call.status === 'completed');
      assert.ok(complete.length >= 1);
      for (const call of complete) assert.equal(schemaViolation(parametersOf(call.name), call.arguments), null, call.arguments);
      assert.deepEqual(callArguments(result.units), result.toolCalls.map(({ name, arguments: args }) => ({ name, arguments: args })), 'streamed deltas add up to the calls');
    }
  }));

  test('a named function, one call: exactly that call, then the generation ends', { timeout: 120_000 }, () => withEngine({}, async ({ engine, tiny }) => {
    for (const seed of [1, 2]) {
      const result = await runGeneration(engine, tiny, { messages, sampling: sampling(seed, 600), tools: TOOLS, toolChoice: { name: 'add' }, parallelToolCalls: false });
      assert.equal(result.finishReason, 'stop');
      assert.equal(result.toolCalls?.length, 1);
      assert.equal(result.toolCalls![0]!.name, 'add');
      assert.equal(result.toolCalls![0]!.status, 'completed');
      assert.equal(schemaViolation(ADD.parameters, result.toolCalls![0]!.arguments), null);
    }
  }));

  test('auto: a model without tool syntax writes text, or (with a JSON format) a well-formed call; none never writes one', { timeout: 120_000 }, () =>
    withEngine({}, async ({ engine, tiny }) => {
      const text = await runGeneration(engine, tiny, { messages, sampling: sampling(1, 120), tools: TOOLS, toolChoice: 'auto' });
      assert.equal(text.finishReason, 'max_output_tokens');
      assert.ok(!text.text.includes(PLAIN_TOOL_CALL_SYNTAX.prefix));
      let calls = 0;
      let answers = 0;
      for (let seed = 1; seed <= 30 && (calls === 0 || answers === 0); seed++) {
        // At temperature 2 lmsp-tiny's first character is `{` (an answer) or `<` (a call) often enough.
        const result = await runGeneration(engine, tiny, { messages, sampling: sampling(seed, 600, 2), tools: TOOLS, toolChoice: 'auto', format: { type: 'json_object' } });
        if (result.finishReason !== 'stop') continue;
        if (result.toolCalls!.length > 0) {
          calls += 1;
          assert.equal(result.text, '');
          for (const call of result.toolCalls!) assert.equal(schemaViolation(parametersOf(call.name), call.arguments), null);
        } else {
          answers += 1;
          assert.equal(typeof JSON.parse(result.text), 'object');
        }
      }
      assert.ok(calls > 0 && answers > 0, `auto chose calls ${calls} times and answers ${answers} times`);
      const none = await runGeneration(engine, tiny, { messages, sampling: sampling(1, 120), tools: TOOLS, toolChoice: 'none' });
      assert.deepEqual(none.toolCalls, []);
      assert.ok(!none.text.includes(PLAIN_TOOL_CALL_SYNTAX.prefix));
    }));

  test("a templated model's forced call follows its template's syntax", { timeout: 120_000 }, () => withEngine({}, async ({ engine, addModel }) => {
    const model = addModel({ ...LMSP_TINY, name: 'chatml-tools', chatTemplate: CHATML_TOOLS_TEMPLATE, controlTokens: CHATML_CONTROL_TOKENS, addBosToken: false, addSpacePrefix: false });
    const result = await runGeneration(engine, model, { messages, sampling: sampling(2, 600), tools: [WEATHER], toolChoice: 'required', parallelToolCalls: false });
    assert.equal(result.finishReason, 'stop');
    assert.equal(result.toolCalls?.length, 1);
    assert.equal(schemaViolation(WEATHER.parameters, result.toolCalls![0]!.arguments), null);
    const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
    const vocabulary = await llama.loadModel({ modelPath: model.path, vocabOnly: true });
    try {
      assert.equal(vocabulary.detokenize(result.tokens as Token[], true), `<tool_call>\n{"name": "get_weather", "arguments": ${result.toolCalls![0]!.arguments}}\n</tool_call>`);
    } finally {
      await vocabulary.dispose();
    }
  }));
});
