/**
 * Whether N sequences decoded in one context give each the tokens it gives alone (same prompt,
 * same seed), for three batching strategies of node-llama-cpp: its default (as many sequences as
 * possible in each batch), prompts in batches of their own, and one sequence per batch (serial).
 * Prints one JSON line per strategy and N.
 * Usage: node dist/bench/batch-invariance.js <model.gguf> <tokens> <N,N,...> [strategies]
 */
import { getLlama, LlamaLogLevel, type BatchingOptions, type Token } from 'node-llama-cpp';
import { renderPrompt } from '../src/engine/prompt.js';

const [modelPath, tokensText, countsText] = process.argv.slice(2);
const maxTokens = Number(tokensText);
const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.warn });
const model = await llama.loadModel({ modelPath: modelPath! });
const isolatePrompts: BatchingOptions['itemPrioritizationStrategy'] = ({ items, size }) => {
  const prompt = items.find((item) => item.tokens.length > 1);
  if (prompt) return [{ item: prompt, processAmount: Math.min(size, prompt.tokens.length) }];
  return items.slice(0, size).map((item) => ({ item, processAmount: item.tokens.length }));
};
const serial: BatchingOptions['itemPrioritizationStrategy'] = ({ items, size }) => [{ item: items[0]!, processAmount: Math.min(size, items[0]!.tokens.length) }];
type Strategy = 'default' | 'isolate' | 'serial';
async function run(streams: number, strategy: Strategy, only?: number): Promise<Token[][]> {
  const context = await model.createContext({ contextSize: 1024, batchSize: 512, sequences: streams, threads: 1,
    ...(strategy === 'isolate' ? { batching: { itemPrioritizationStrategy: isolatePrompts } } : strategy === 'serial' ? { batching: { itemPrioritizationStrategy: serial } } : {}) });
  const outputs = await Promise.all(Array.from({ length: streams }, async (_, index) => {
    if (only !== undefined && index !== only) return [];
    const sequence = context.getSequence();
    const prompt = renderPrompt(model, [{ role: 'user', content: `Stream ${index}: tell me about the sea and the ships.` }]).tokens;
    const tokens: Token[] = [];
    for await (const token of sequence.evaluate(prompt, { temperature: 1, topP: 1, topK: 0, minP: 0, seed: 100 + index })) {
      tokens.push(token);
      if (tokens.length >= maxTokens) break;
    }
    return tokens;
  }));
  await context.dispose();
  return outputs;
}
const maxStreams = Math.max(...countsText!.split(',').map(Number));
const alone: Token[][] = [];
for (let index = 0; index < maxStreams; index++) alone.push((await run(maxStreams, 'default', index))[index]!);
for (const strategy of (process.argv[5] ?? 'default,isolate,serial').split(',') as Strategy[]) {
  for (const streams of countsText!.split(',').map(Number)) {
    const outputs = await run(streams, strategy);
    const same = outputs.map((tokens, index) => tokens.every((token, at) => token === alone[index]![at]));
    process.stdout.write(`${JSON.stringify({ strategy, streams, same })}\n`);
  }
}
