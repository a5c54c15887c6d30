/**
 * The baseline of the embeddings benchmark: node-llama-cpp's embedding context on the same
 * model and inputs, in a process of its own, with the context settings the runner uses.
 * Prints one JSON line per run: embeddings per second.
 */
import { readFileSync } from 'node:fs';
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';

const [modelPath, inputsPath, threadsText, runsText] = process.argv.slice(2);
const inputs = JSON.parse(readFileSync(inputsPath!, 'utf8')) as string[];
const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.warn });
const model = await llama.loadModel({ modelPath: modelPath! });
const context = await model.createEmbeddingContext({ contextSize: 512, batchSize: 512, threads: Number(threadsText) });
await context.getEmbeddingFor(inputs[0]!);
for (let run = 0; run < Number(runsText ?? 1); run++) {
  const started = performance.now();
  for (const input of inputs) await context.getEmbeddingFor(input);
  process.stdout.write(`${JSON.stringify({ embeddingsPerSecond: inputs.length / ((performance.now() - started) / 1000) })}\n`);
}
await context.dispose();
await model.dispose();
