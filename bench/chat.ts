/**
 * Chat Completions streaming (LMSP 13): tokens per second of one generation streamed as
 * `chat.completion.chunk` frames (every chunk committed to the task's log before it is sent),
 * against the same generation streamed through the Responses API, and against node-llama-cpp
 * decoding the same model, prompt and seed directly (bench/direct-decode.ts), in one run.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultThreads } from '../src/config.js';
import { writeGgufFile } from '../src/engine/gguf-writer.js';
import { BENCH_MODEL, buildSyntheticModel } from '../src/engine/synthetic-model.js';
import { api } from '../test/helpers/service.js';
import { readSse } from '../test/helpers/sse.js';
import { log, median, runs, startService, timeResponseStream, type Figure, type TestService } from './lib.js';

const TOKENS = 512;
const SEED = 1234;
const INPUT = 'Tell me everything about the sea.';
const MODEL = 'bench';

/** Tokens per second between the first and the last text frame of a stream. */
function rate(tokens: number, first: number, last: number): number {
  return (tokens - 1) / ((last - first) / 1000);
}

async function viaChat(service: TestService): Promise<number> {
  const response = await api(service, '/v1/chat/completions', {
    method: 'POST',
    json: {
      model: MODEL, messages: [{ role: 'user', content: INPUT }], stream: true, stream_options: { include_usage: true },
      max_completion_tokens: TOKENS, seed: SEED, temperature: 1,
    },
  });
  let first = 0;
  let last = 0;
  let tokens = 0;
  for await (const frame of readSse(response)) {
    if (frame.data === '[DONE]') break;
    const chunk = JSON.parse(frame.data) as { choices: Array<{ delta: { content?: string } }>; usage?: { completion_tokens: number } | null };
    if (chunk.choices[0]?.delta.content) {
      last = performance.now();
      if (!first) first = last;
    }
    if (chunk.usage) tokens = chunk.usage.completion_tokens;
  }
  if (tokens !== TOKENS) throw new Error(`expected ${TOKENS} tokens, got ${tokens}`);
  return rate(tokens, first, last);
}

async function viaResponses(service: TestService): Promise<number> {
  const response = await api(service, '/v1/responses', {
    method: 'POST',
    json: { model: MODEL, input: INPUT, stream: true, max_output_tokens: TOKENS, seed: SEED, temperature: 1 },
  });
  const { first, last, tokens } = await timeResponseStream(response);
  if (tokens !== TOKENS) throw new Error(`expected ${TOKENS} tokens, got ${tokens}`);
  return rate(tokens, first, last);
}

function direct(modelPath: string): Promise<number> {
  const script = fileURLToPath(new URL('./direct-decode.js', import.meta.url));
  const child = spawn(process.execPath, [script, modelPath, INPUT, String(TOKENS), String(SEED), String(defaultThreads()), '1'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) => child.on('exit', (code) => {
    if (code !== 0) return reject(new Error(`direct decoding exited with ${code}`));
    resolve((JSON.parse(output.trim().split('\n')[0]!) as { tokensPerSecond: number }).tokensPerSecond);
  }));
}

export async function benchChat(): Promise<Figure[]> {
  const service = await startService({ env: { LMSP_LOG_LEVEL: 'warn' } });
  try {
    const modelPath = join(service.dataDir, 'models', 'bench.gguf');
    writeGgufFile(modelPath, buildSyntheticModel(BENCH_MODEL));
    const registered = await api(service, '/v1/models', { method: 'POST', json: { path: 'bench.gguf', id: MODEL } });
    if (registered.status !== 201) throw new Error(`cannot register the benchmark model: ${registered.status}`);
    await viaChat(service); // loads the model
    const chat: number[] = [];
    const responses: number[] = [];
    const baseline: number[] = [];
    for (let run = 0; run < runs(); run++) {
      chat.push(await viaChat(service));
      responses.push(await viaResponses(service));
      // The service keeps its model loaded meanwhile, as it would between requests.
      baseline.push(await direct(modelPath));
      log(`chat run ${run + 1}: chat ${chat.at(-1)!.toFixed(0)} tok/s, responses ${responses.at(-1)!.toFixed(0)} tok/s, direct ${baseline.at(-1)!.toFixed(0)} tok/s`);
    }
    const model = `${BENCH_MODEL.embedding} wide, ${BENCH_MODEL.layers} layers, ${BENCH_MODEL.tensorType}`;
    const value = median(chat);
    const figure = (name: string, against: number[], how: string): Figure => ({
      name, value, baseline: median(against), unit: 'tok/s', ratio: value / median(against), target: '>= 0.95',
      met: value / median(against) >= 0.95, how, samples: { value: chat, baseline: against },
    });
    return [
      figure('Chat completion streaming vs node-llama-cpp (tokens/s)', baseline,
        howOf(model, 'node-llama-cpp decoding the same model, prompt and seed directly')),
      figure('Chat completion streaming vs Responses streaming (tokens/s)', responses,
        howOf(model, 'the same generation streamed through POST /v1/responses')),
    ];
  } finally {
    await service.kill();
  }

  function howOf(model: string, what: string): string {
    return `${TOKENS} tokens of a generated ${model} model, seed ${SEED}, ${defaultThreads()} thread(s): chat.completion.chunk frames through POST /v1/chat/completions (chunks committed first) vs ${what}`;
  }
}
