// lmsp from LangChain JS (@langchain/openai): only the base URL and the key change.
//
//   LMSP_TOKEN=lmsp_... node examples/langchain.mjs
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';

if (!process.env.LMSP_TOKEN) {
  console.error('Set LMSP_TOKEN to a token of lmsp: the comment at the top of this file says how to get one.');
  process.exit(1);
}

const configuration = { baseURL: process.env.LMSP_BASE_URL ?? 'http://127.0.0.1:5677/v1' };
const apiKey = process.env.LMSP_TOKEN;
const model = process.env.LMSP_MODEL ?? 'lmsp-tiny';

// Embeddings: a query and the documents to rank against it.
const embeddings = new OpenAIEmbeddings({ model, apiKey, configuration });
const query = await embeddings.embedQuery('Where did the cat sit?');
const documents = ['The cat sat on the mat.', 'Stocks fell sharply today.'];
const vectors = await embeddings.embedDocuments(documents);
const dot = (a, b) => a.reduce((sum, value, index) => sum + value * b[index], 0);
console.log(`embedQuery: ${query.length} dimensions`);
vectors.forEach((vector, index) => console.log(`embedDocuments: "${documents[index]}" scores ${dot(query, vector).toFixed(3)}`));

// Chat: a completion, then the same one streamed (each is a durable task on the service).
const chat = new ChatOpenAI({ model, apiKey, configuration, maxTokens: 30 });
const message = await chat.invoke('Say hello.', { seed: 1 });
console.log(`invoke (${message.response_metadata.finish_reason}): ${message.content}`);
process.stdout.write('stream: ');
for await (const chunk of await chat.stream('Say hello.', { seed: 1 })) process.stdout.write(chunk.content);
process.stdout.write('\n');

// An object valid against its schema, whatever the model.
const person = {
  title: 'person',
  type: 'object',
  properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
  required: ['name', 'age'],
  additionalProperties: false,
};
const structured = new ChatOpenAI({ model, apiKey, configuration, maxTokens: 200 }).withStructuredOutput(person, { method: 'jsonSchema' });
console.log(`withStructuredOutput: ${JSON.stringify(await structured.invoke('Describe a person.'))}`);

// A tool the model must call, with arguments valid against its parameters.
const add = {
  type: 'function',
  function: {
    name: 'add',
    description: 'Adds two digits.',
    parameters: {
      type: 'object',
      properties: { a: { type: 'integer', minimum: 0, maximum: 9 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
      required: ['a', 'b'],
      additionalProperties: false,
    },
  },
};
const call = await new ChatOpenAI({ model, apiKey, configuration, maxTokens: 2000 }).bindTools([add], { tool_choice: 'add' }).invoke('What is 2 + 3?');
console.log(`tool call: ${call.tool_calls[0].name}(${JSON.stringify(call.tool_calls[0].args)})`);
