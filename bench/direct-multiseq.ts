/**
 * The baseline of the slots benchmark: node-llama-cpp directly, N streams as N sequences of one
 * context, each decoding the same prompt with its own seed, their evaluations batched by the
 * context. Prints one JSON line per stream count: aggregate tokens per second, and whether the
 * first stream's tokens are the same as when it decodes alone (batched sequences compute what
 * one sequence computes).
 */
import { getLlama, LlamaLogLevel, type Token } from 'node-llama-cpp';
import { renderPrompt } from '../src/engine/prompt.js';

const [modelPath, input, maxTokensText, seedText, threadsText, countsText, gpuText] = process.argv.slice(2);
const maxTokens = Number(maxTokensText);
const seed = Number(seedText);
// `cpu`, `auto` (llama.cpp picks), or a backend by name, as the service's `--gpu`.
const gpu = gpuText === 'cpu' || !gpuText ? false : (gpuText as 'auto' | 'cuda' | 'vulkan' | 'metal');
const llama = await getLlama({ gpu, logLevel: LlamaLogLevel.warn });
process.stderr.write(`[bench] direct: llama.cpp backend ${String(llama.gpu)}\n`);
const model = await llama.loadModel({ modelPath: modelPath! });
const prompt = renderPrompt(model, [{ role: 'user', content: input! }]).tokens;
// A first evaluation compiles what the backend compiles on first use (a GPU's shaders, say), so
// that the first measured stream count does not pay for it.
{
  const context = await model.createContext({ contextSize: 256, batchSize: 512, sequences: 1, threads: Number(threadsText) });
  const sequence = context.getSequence();
  let warm = 0;
  for await (const token of sequence.evaluate(prompt, { temperature: 1, seed })) {
    void token;
    if (++warm >= 8) break;
  }
  await context.dispose();
}
let alone: Token[] | null = null;
for (const streams of countsText!.split(',').map(Number)) {
  const contextSize = Math.ceil((prompt.length + maxTokens + 1) / 256) * 256;
  const context = await model.createContext({ contextSize, batchSize: 512, sequences: streams, threads: Number(threadsText) });
  const started = performance.now();
  const outputs = await Promise.all(Array.from({ length: streams }, async (_, index) => {
    const sequence = context.getSequence();
    const tokens: Token[] = [];
    for await (const token of sequence.evaluate(prompt, { temperature: 1, topP: 1, topK: 0, minP: 0, seed: seed + index })) {
      tokens.push(token);
      if (tokens.length >= maxTokens) break;
    }
    return tokens;
  }));
  const seconds = (performance.now() - started) / 1000;
  await context.dispose();
  const total = outputs.reduce((sum, tokens) => sum + tokens.length, 0);
  alone ??= outputs[0]!;
  const sameAsAlone = outputs[0]!.length === alone.length && outputs[0]!.every((token, index) => token === alone![index]);
  process.stdout.write(`${JSON.stringify({ streams, tokensPerSecond: total / seconds, tokens: total, sameAsAlone })}\n`);
}
await model.dispose();
