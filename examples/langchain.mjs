// lmsp from LangChain JS (@langchain/openai): only the base URL and the key change.
//
//   LMSP_TOKEN=lmsp_... node examples/langchain.mjs
import { OpenAIEmbeddings } from '@langchain/openai';

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
