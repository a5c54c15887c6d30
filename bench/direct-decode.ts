/**
 * The baseline of the streaming benchmark: node-llama-cpp decoding the same model, prompt and
 * seed directly, in a process of its own, the plain way (LlamaContextSequence.evaluate).
 * Prints one JSON line per run: time to first token and tokens per second.
 */
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';
import { renderPrompt } from '../src/engine/prompt.js';

const [modelPath, input, maxTokensText, seedText, threadsText, runsText] = process.argv.slice(2);
const maxTokens = Number(maxTokensText);
const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.warn });
const model = await llama.loadModel({ modelPath: modelPath! });
const prompt = renderPrompt(model, [{ role: 'user', content: input! }]).tokens;
for (let run = 0; run < Number(runsText ?? 1); run++) {
  const started = performance.now();
  const contextSize = Math.ceil((prompt.length + maxTokens + 1) / 256) * 256;
  const context = await model.createContext({ contextSize, batchSize: 512, sequences: 1, threads: Number(threadsText) });
  const sequence = context.getSequence();
  let first = 0;
  let last = 0;
  let count = 0;
  for await (const token of sequence.evaluate(prompt, { temperature: 1, topP: 1, topK: 0, minP: 0, seed: Number(seedText) })) {
    void token;
    last = performance.now();
    if (count === 0) first = last;
    count += 1;
    if (count >= maxTokens) break;
  }
  await context.dispose();
  process.stdout.write(`${JSON.stringify({ ttftMs: first - started, tokensPerSecond: (count - 1) / ((last - first) / 1000), tokens: count })}\n`);
}
await model.dispose();
