import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { getLlama, LlamaLogLevel, type Llama, type LlamaModel } from 'node-llama-cpp';
import { writeGgufFile } from '../../src/engine/gguf-writer.js';
import { PLAIN_TOOL_CALL_SYNTAX, renderPlainLayout } from '../../src/engine/plain-layout.js';
import { renderPrompt } from '../../src/engine/prompt.js';
import {
  buildSyntheticModel, LMSP_TINY, SYNTHETIC_SPACE_TOKEN_ID, SYNTHETIC_VOCABULARY_SIZE, syntheticByteTokenId,
} from '../../src/engine/synthetic-model.js';
import type { EngineMessage, ToolDefinition } from '../../src/engine/types.js';
import { makeDataDir } from '../helpers/data-dir.js';
import { withEngine } from '../helpers/engine.js';
import { CHATML_CONTROL_TOKENS, CHATML_TEMPLATE, CHATML_TOOLS_TEMPLATE, LLAMA31_CONTROL_TOKENS, LLAMA31_TEMPLATE } from '../helpers/templates.js';

const IM_START = SYNTHETIC_VOCABULARY_SIZE;
const IM_END = SYNTHETIC_VOCABULARY_SIZE + 1;

/** Token ids of ASCII text in the synthetic vocabulary: one byte token per character, `▁` for spaces. */
function spell(text: string): number[] {
  return [...text].map((char) => (char === ' ' ? SYNTHETIC_SPACE_TOKEN_ID : syntheticByteTokenId(char.charCodeAt(0))));
}

const CONVERSATION: EngineMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi there' },
  { role: 'assistant', content: 'Hello.' },
  { role: 'user', content: 'Bye' },
];

const WEATHER: ToolDefinition = {
  name: 'get_weather',
  description: 'Get the weather',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

const TOOL_CONVERSATION: EngineMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }] },
  { role: 'tool', toolCallId: 'call_1', content: '{"temp":20}' },
];

describe('chat templates (LMSP 6.2)', () => {
  let llama: Llama;
  const dir = makeDataDir('templates');
  const models = new Map<string, LlamaModel>();

  before(async () => {
    llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
    for (const [name, chatTemplate] of [['chatml', CHATML_TEMPLATE], ['chatml-tools', CHATML_TOOLS_TEMPLATE]] as const) {
      const path = join(dir, `${name}.gguf`);
      writeGgufFile(path, buildSyntheticModel({ ...LMSP_TINY, name, chatTemplate, controlTokens: CHATML_CONTROL_TOKENS, addBosToken: false, addSpacePrefix: false }));
      models.set(name, await llama.loadModel({ modelPath: path, vocabOnly: true }));
    }
    const llama31 = join(dir, 'llama31.gguf');
    writeGgufFile(llama31, buildSyntheticModel({ ...LMSP_TINY, name: 'llama31', chatTemplate: LLAMA31_TEMPLATE, controlTokens: LLAMA31_CONTROL_TOKENS, addSpacePrefix: false }));
    models.set('llama31', await llama.loadModel({ modelPath: llama31, vocabOnly: true }));
    const tiny = join(dir, 'tiny.gguf');
    writeGgufFile(tiny, buildSyntheticModel(LMSP_TINY));
    models.set('tiny', await llama.loadModel({ modelPath: tiny, vocabOnly: true }));
  });

  after(async () => {
    for (const model of models.values()) await model.dispose();
  });

  test("a GGUF's ChatML template renders system, user, assistant, user as exactly the ChatML tokens", () => {
    const { tokens } = renderPrompt(models.get('chatml')!, CONVERSATION);
    const turn = (role: string, text: string) => [IM_START, ...spell(`${role}\n${text}`), IM_END, ...spell('\n')];
    const expected = [
      ...turn('system', 'Be brief.'), ...turn('user', 'Hi there'), ...turn('assistant', 'Hello.'), ...turn('user', 'Bye'),
      IM_START, ...spell('assistant\n'),
    ];
    assert.deepEqual(tokens, expected);
  });

  test('the markers are single control tokens, and a model that asks for BOS gets exactly one', async () => {
    const path = join(dir, 'chatml-bos.gguf');
    writeGgufFile(path, buildSyntheticModel({ ...LMSP_TINY, name: 'chatml-bos', chatTemplate: CHATML_TEMPLATE, controlTokens: CHATML_CONTROL_TOKENS }));
    const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
    try {
      const { tokens } = renderPrompt(model, [{ role: 'user', content: 'x' }]);
      assert.equal(tokens[0], 1, 'BOS first');
      assert.equal(tokens.filter((token) => token === 1).length, 1);
      assert.equal(tokens[1], IM_START);
    } finally {
      await model.dispose();
    }
  });

  test('tool definitions, a call and its result render through a template that knows tools', () => {
    const model = models.get('chatml-tools')!;
    const prompt = renderPrompt(model, TOOL_CONVERSATION, [WEATHER]);
    const text = model.detokenize(prompt.tokens, true);
    assert.equal(text, [
      '<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n',
      'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n',
      '{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n',
      '</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n',
      '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n',
      '<|im_start|>user\nWeather in Paris?<|im_end|>\n',
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n',
      // The result as the client sent it, as Hugging Face renders the template: not re-serialized.
      '<|im_start|>user\n<tool_response>\n{"temp":20}\n</tool_response><|im_end|>\n',
      '<|im_start|>assistant\n',
    ].join(''));
    // A result in plain text stays plain text, not a JSON string.
    const plainResult = renderPrompt(model, [...TOOL_CONVERSATION.slice(0, 3), { role: 'tool', toolCallId: 'call_1', content: 'Sunny, 20 "degrees"' }], [WEATHER]);
    assert.ok(model.detokenize(plainResult.tokens, true).endsWith('<|im_start|>user\n<tool_response>\nSunny, 20 "degrees"\n</tool_response><|im_end|>\n<|im_start|>assistant\n'),
      model.detokenize(plainResult.tokens, true).slice(-120));
    assert.deepEqual(prompt.toolCallSyntax, { prefix: '<tool_call>\n{"name": "', paramsPrefix: '", "arguments": ', suffix: '}\n</tool_call>', betweenCalls: '\n' },
      'the call syntax is read from the template');
  });

  test('after tool results the assistant\'s next message starts its turn as the template writes it, with no blank line before it', () => {
    const model = models.get('chatml-tools')!;
    const call = (id: string, city: string) => ({ role: 'assistant' as const, content: '', toolCalls: [{ id, name: 'get_weather', arguments: JSON.stringify({ city }) }] });
    const result = (id: string, content: string) => ({ role: 'tool' as const, toolCallId: id, content });
    const tail = (messages: EngineMessage[]) => {
      const text = model.detokenize(renderPrompt(model, messages, [WEATHER]).tokens, true);
      return text.slice(text.indexOf('<|im_start|>user\nWeather'));
    };
    // A second round of calls after the first one's results.
    assert.equal(tail([{ role: 'user', content: 'Weather in Paris?' }, call('call_1', 'Paris'), result('call_1', '{"temp":20}'),
      call('call_2', 'Rome'), result('call_2', '{"temp":25}')]), [
      '<|im_start|>user\nWeather in Paris?<|im_end|>\n',
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n',
      '<|im_start|>user\n<tool_response>\n{"temp":20}\n</tool_response><|im_end|>\n',
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n',
      '<|im_start|>user\n<tool_response>\n{"temp":25}\n</tool_response><|im_end|>\n',
      '<|im_start|>assistant\n',
    ].join(''));
    // A text answer after the results, then the user again.
    assert.equal(tail([{ role: 'user', content: 'Weather in Paris?' }, call('call_1', 'Paris'), result('call_1', '{"temp":20}'),
      { role: 'assistant', content: 'It is 20.' }, { role: 'user', content: 'Thanks' }]), [
      '<|im_start|>user\nWeather in Paris?<|im_end|>\n',
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n',
      '<|im_start|>user\n<tool_response>\n{"temp":20}\n</tool_response><|im_end|>\n',
      '<|im_start|>assistant\nIt is 20.<|im_end|>\n',
      '<|im_start|>user\nThanks<|im_end|>\n',
      '<|im_start|>assistant\n',
    ].join(''));
  });

  test("a template that writes tool results through tojson (Llama 3.1's) gets each as a JSON string, as Hugging Face renders it", () => {
    const model = models.get('llama31')!;
    const ipython = (content: string) => {
      const text = model.detokenize(renderPrompt(model, [...TOOL_CONVERSATION.slice(0, 3), { role: 'tool', toolCallId: 'call_1', content }], [WEATHER]).tokens, true);
      const start = text.indexOf('<|start_header_id|>ipython<|end_header_id|>\n\n');
      assert.ok(start >= 0, text);
      return text.slice(start).split('<|eot_id|>')[0]!.slice('<|start_header_id|>ipython<|end_header_id|>\n\n'.length);
    };
    assert.equal(ipython('{"temp":20}'), '"{\\"temp\\":20}"');
    assert.equal(ipython('Sunny, 20 "degrees"\nand dry'), '"Sunny, 20 \\"degrees\\"\\nand dry"');
    // The call itself, and the rest of the turn, as the template writes them.
    const text = model.detokenize(renderPrompt(model, TOOL_CONVERSATION, [WEATHER]).tokens, true);
    assert.ok(text.includes('<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>'), text);
    assert.ok(text.endsWith('<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n'), text.slice(-80));
  });

  test('a new turn ends as the template writes add_generation_prompt, not as it writes an empty assistant message', async () => {
    const render = async (name: string, chatTemplate: string, controlTokens: string[], messages: EngineMessage[]) => {
      const path = join(dir, `${name}.gguf`);
      writeGgufFile(path, buildSyntheticModel({ ...LMSP_TINY, name, chatTemplate, controlTokens, addBosToken: false, addSpacePrefix: false }));
      const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
      try {
        return model.detokenize(renderPrompt(model, messages).tokens, true);
      } finally {
        await model.dispose();
      }
    };
    // Qwen3's way: an assistant message in the history gets an empty thinking block, which for the
    // new turn would tell the model not to think.
    const thinking = "{% for m in messages %}{% if m.role == 'assistant' %}<|im_start|>assistant\n<think>\n\n</think>\n\n{{ m.content }}<|im_end|>\n"
      + "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    assert.equal(await render('thinking', thinking, ['<|im_start|>', '<|im_end|>', '<think>', '</think>'], CONVERSATION.slice(1)),
      '<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n');
    // Mistral's way: no generation prompt, and a space before each assistant text.
    const spaced = "{% for m in messages %}{% if m.role == 'user' %}[INST] {{ m.content }}[/INST]{% elif m.role == 'assistant' %} {{ m.content }}[END]{% endif %}{% endfor %}";
    assert.equal(await render('spaced', spaced, ['[INST]', '[/INST]', '[END]'], CONVERSATION.slice(1)), '[INST] Hi there[/INST] Hello.[END][INST] Bye[/INST]');
    // DeepSeek R1's way: the generation prompt opens the thinking block for the model.
    const opened = "{% for m in messages %}{% if m.role == 'user' %}<|User|>{{ m.content }}{% else %}<|Assistant|>{{ m.content }}<|end|>{% endif %}{% endfor %}"
      + "{% if add_generation_prompt %}<|Assistant|><think>\n{% endif %}";
    assert.equal(await render('opened', opened, ['<|User|>', '<|Assistant|>', '<|end|>', '<think>'], [{ role: 'user', content: 'Hi' }]), '<|User|>Hi<|Assistant|><think>\n');
  });

  test('a template without tools gets them documented in its system message, in the call syntax it is told', () => {
    const model = models.get('chatml')!;
    const prompt = renderPrompt(model, TOOL_CONVERSATION, [WEATHER]);
    const text = model.detokenize(prompt.tokens, true);
    assert.match(text, /^<\|im_start\|>system\nBe brief\.\n\n[^]*function get_weather\(params: \{city: string\}\);[^]*<\|im_end\|>\n<\|im_start\|>user\nWeather in Paris\?<\|im_end\|>\n/);
    assert.ok(text.endsWith('<|im_start|>assistant\n||call: get_weather({"city": "Paris"})\n||result: {"temp": 20}\n'), text.slice(-120));
    assert.deepEqual(prompt.toolCallSyntax, { prefix: '||call: ', paramsPrefix: '(', suffix: ')', betweenCalls: null });
  });

  test('the built-in fixed layout: unchanged without tools; tools, calls and results as plain lines', () => {
    assert.equal(renderPlainLayout(CONVERSATION, []), 'System: Be brief.\nUser: Hi there\nAssistant: Hello.\nUser: Bye\nAssistant:');
    assert.equal(renderPlainLayout(TOOL_CONVERSATION, [WEATHER]), [
      'System: Be brief.',
      'Tools:',
      '- get_weather: Get the weather Parameters: {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}',
      'Call a tool by writing <tool_call>{"name": "NAME", "arguments": ARGUMENTS}</tool_call>',
      'User: Weather in Paris?',
      'Assistant: <tool_call>{"name": "get_weather", "arguments": {"city":"Paris"}}</tool_call>',
      'Tool get_weather (call_1): {"temp":20}',
      'Assistant:',
    ].join('\n'));
    const prompt = renderPrompt(models.get('tiny')!, TOOL_CONVERSATION, [WEATHER]);
    assert.equal(prompt.tokens[0], 1, 'BOS');
    assert.deepEqual(prompt.toolCallSyntax, PLAIN_TOOL_CALL_SYNTAX);
  });

  test('the engine counts the tools into the prompt size', { timeout: 60_000 }, () => withEngine({}, async ({ engine, tiny }) => {
    const without = await engine.countTokens(tiny, TOOL_CONVERSATION);
    const withTools = await engine.countTokens(tiny, TOOL_CONVERSATION, [WEATHER]);
    const expected = renderPrompt(models.get('tiny')!, TOOL_CONVERSATION, [WEATHER]).tokens.length;
    assert.equal(withTools.tokens, expected);
    assert.ok(withTools.tokens > without.tokens);
    assert.equal(withTools.contextLength, 16384);
  }));
});
