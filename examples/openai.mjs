// Use lmsp from the official openai package: only baseURL and apiKey change.
//
//   npx lmsp pair --name example            # then exchange the code for a token:
//   curl -s http://127.0.0.1:5677/v1/pair -H 'content-type: application/json' \
//     -d '{"code": "XXXX-XXXX", "client_name": "example"}'
//   LMSP_TOKEN=lmsp_... node examples/openai.mjs
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

// 1. A plain request: waits for the finished response.
const response = await client.responses.create({ model, input: 'Say hello.', max_output_tokens: 40, seed: 1 });
console.log(`plain (${response.status}): ${response.output_text}`);

// 2. Streaming with the SDK's helper: text as it is generated.
process.stdout.write('stream: ');
const stream = client.responses.stream({ model, input: 'Count to ten.', max_output_tokens: 40 });
stream.on('response.output_text.delta', (event) => process.stdout.write(event.delta));
await stream.finalResponse();
process.stdout.write('\n');

// 3. Background: the task is on disk when the 202 comes back; follow it, or come back later.
const background = await client.responses.create(
  { model, input: 'Write a long story.', max_output_tokens: 200, background: true },
  { headers: { 'Idempotency-Key': `example-${Date.now()}` } }, // safe to retry, even across a crash
);
console.log(`background: ${background.id} is ${background.status}`);
let seen = 0;
for await (const event of await client.responses.retrieve(background.id, { stream: true, starting_after: 0 })) {
  seen = event.sequence_number; // reconnect later with starting_after: seen
}
const done = await client.responses.retrieve(background.id);
console.log(`background: ${done.status} after ${seen} events, ${done.usage?.output_tokens} tokens`);
