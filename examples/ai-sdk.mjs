// lmsp from the Vercel AI SDK, through its OpenAI-compatible provider: only baseURL and apiKey change.
//
//   LMSP_TOKEN=lmsp_... node examples/ai-sdk.mjs
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { cosineSimilarity, embed, embedMany, generateObject, generateText, jsonSchema, streamText, tool } from 'ai';

if (!process.env.LMSP_TOKEN) {
  console.error('Set LMSP_TOKEN to a token of lmsp: the comment at the top of this file says how to get one.');
  process.exit(1);
}

const lmsp = createOpenAICompatible({
  name: 'lmsp',
  baseURL: process.env.LMSP_BASE_URL ?? 'http://127.0.0.1:5677/v1',
  apiKey: process.env.LMSP_TOKEN,
  includeUsage: true, // the usage of a streamed completion
  supportsStructuredOutputs: true, // objects by a json_schema response_format, enforced while sampling
});
const modelId = process.env.LMSP_MODEL ?? 'lmsp-tiny';

// Embeddings: one value, then several in one request.
const { embedding } = await embed({ model: lmsp.embeddingModel(modelId), value: 'The cat sat on the mat.' });
console.log(`embed: ${embedding.length} dimensions`);
const documents = ['A kitten slept on a rug.', 'Stocks fell sharply today.'];
const { embeddings, usage } = await embedMany({ model: lmsp.embeddingModel(modelId), values: documents });
console.log(`embedMany: ${embeddings.length} vectors, ${usage.tokens} tokens`);
embeddings.forEach((vector, index) => console.log(`similarity to "${documents[index]}": ${cosineSimilarity(embedding, vector).toFixed(3)}`));

// Chat: a completion, then the same one streamed (each is a durable task on the service).
const model = lmsp.chatModel(modelId);
const { text, finishReason } = await generateText({ model, prompt: 'Say hello.', maxOutputTokens: 30, seed: 1 });
console.log(`generateText (${finishReason}): ${text}`);
const stream = streamText({ model, prompt: 'Say hello.', maxOutputTokens: 30, seed: 1 });
process.stdout.write('streamText: ');
for await (const delta of stream.textStream) process.stdout.write(delta);
process.stdout.write(`\nstreamText usage: ${(await stream.usage).outputTokens} tokens\n`);

// An object valid against its schema, whatever the model.
const person = jsonSchema({
  type: 'object',
  properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
  required: ['name', 'age'],
  additionalProperties: false,
});
const { object } = await generateObject({ model, schema: person, prompt: 'Describe a person.', maxOutputTokens: 200 });
console.log(`generateObject: ${JSON.stringify(object)}`);

// A tool the model must call, with arguments valid against its input schema.
const add = tool({
  description: 'Adds two digits.',
  inputSchema: jsonSchema({
    type: 'object',
    properties: { a: { type: 'integer', minimum: 0, maximum: 9 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
    required: ['a', 'b'],
    additionalProperties: false,
  }),
});
const { toolCalls } = await generateText({ model, prompt: 'What is 2 + 3?', tools: { add }, toolChoice: { type: 'tool', toolName: 'add' }, maxOutputTokens: 2000 });
console.log(`tool call: ${toolCalls[0].toolName}(${JSON.stringify(toolCalls[0].input)})`);
