// Chat Completions from the official openai package: only baseURL and apiKey change.
// Each completion is a durable task; the LMSP-Task-Id header names it.
//
//   LMSP_TOKEN=lmsp_... node examples/openai-chat.mjs
import OpenAI from 'openai';

if (!process.env.LMSP_TOKEN) {
  console.error('Set LMSP_TOKEN to a token of lmsp: the comment at the top of this file says how to get one.');
  process.exit(1);
}

const client = new OpenAI({
  baseURL: process.env.LMSP_BASE_URL ?? 'http://127.0.0.1:5677/v1',
  apiKey: process.env.LMSP_TOKEN,
});
const model = process.env.LMSP_MODEL ?? 'lmsp-tiny';
const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello.' }];

// 1. A plain request, stored (store: true) so it can be listed and read back later.
const { data: completion, response } = await client.chat.completions
  .create({ model, messages, max_completion_tokens: 40, seed: 1, store: true, metadata: { example: 'chat' } })
  .withResponse();
console.log(`plain (${completion.choices[0].finish_reason}, task ${response.headers.get('lmsp-task-id')}): ${completion.choices[0].message.content}`);

// 2. Streaming, with the usage in a last chunk.
process.stdout.write('stream: ');
const stream = await client.chat.completions.create({ model, messages, max_completion_tokens: 40, stream: true, stream_options: { include_usage: true } });
let usage = null;
for await (const chunk of stream) {
  process.stdout.write(chunk.choices[0]?.delta.content ?? '');
  usage = chunk.usage ?? usage;
}
process.stdout.write(`\nstream usage: ${usage.completion_tokens} tokens\n`);

// 3. A forced tool call: arguments valid against the function's parameters.
const tools = [{ type: 'function', function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'] } } }];
const call = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_completion_tokens: 200 });
const [toolCall] = call.choices[0].message.tool_calls;
console.log(`tool call: ${toolCall.function.name}(${toolCall.function.arguments})`);

// 4. The stored completion, found by its metadata.
for await (const stored of client.chat.completions.list({ metadata: { example: 'chat' } })) {
  console.log(`stored: ${stored.id}`);
}
