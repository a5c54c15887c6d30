// Embeddings from the official openai package: only baseURL and apiKey change.
//
//   LMSP_TOKEN=lmsp_... node examples/openai-embeddings.mjs
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
const documents = ['The cat sat on the mat.', 'A kitten slept on a rug.', 'Stocks fell sharply today.'];

// 1. Floats, as JSON numbers. Vectors are unit length, so a dot product is the cosine similarity.
const floats = await client.embeddings.create({ model, input: documents, encoding_format: 'float' });
const dot = (a, b) => a.reduce((sum, value, index) => sum + value * b[index], 0);
const [cat, kitten, stocks] = floats.data.map((item) => item.embedding);
console.log(`float: ${floats.data.length} vectors of ${cat.length}, ${floats.usage.prompt_tokens} tokens`);
console.log(`similarity: cat~kitten ${dot(cat, kitten).toFixed(3)}, cat~stocks ${dot(cat, stocks).toFixed(3)}`);

// 2. The SDK's default: it asks for base64 (a quarter of the bytes) and decodes it to the same numbers.
const decoded = await client.embeddings.create({ model, input: documents });
const same = decoded.data.every((item, index) => item.embedding.every((value, at) => value === floats.data[index].embedding[at]));
console.log(`base64: the same numbers: ${same}`);

// 3. Shorter vectors: cut to the first dimensions and renormalised.
const short = await client.embeddings.create({ model, input: documents[0], dimensions: 16 });
console.log(`dimensions: ${short.data[0].embedding.length}, norm ${Math.sqrt(dot(short.data[0].embedding, short.data[0].embedding)).toFixed(6)}`);
