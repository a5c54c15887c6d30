// lmsp from the Vercel AI SDK, through its OpenAI-compatible provider: only baseURL and apiKey change.
//
//   LMSP_TOKEN=lmsp_... node examples/ai-sdk.mjs
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { cosineSimilarity, embed, embedMany } from 'ai';

const lmsp = createOpenAICompatible({
  name: 'lmsp',
  baseURL: process.env.LMSP_BASE_URL ?? 'http://127.0.0.1:5677/v1',
  apiKey: process.env.LMSP_TOKEN,
});
const modelId = process.env.LMSP_MODEL ?? 'lmsp-tiny';

// Embeddings: one value, then several in one request.
const { embedding } = await embed({ model: lmsp.embeddingModel(modelId), value: 'The cat sat on the mat.' });
console.log(`embed: ${embedding.length} dimensions`);
const documents = ['A kitten slept on a rug.', 'Stocks fell sharply today.'];
const { embeddings, usage } = await embedMany({ model: lmsp.embeddingModel(modelId), values: documents });
console.log(`embedMany: ${embeddings.length} vectors, ${usage.tokens} tokens`);
embeddings.forEach((vector, index) => console.log(`similarity to "${documents[index]}": ${cosineSimilarity(embedding, vector).toFixed(3)}`));
