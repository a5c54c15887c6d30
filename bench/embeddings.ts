/**
 * Embeddings: embeddings per second of one `POST /v1/embeddings` of EMBED_INPUTS inputs to the
 * real service (HTTP, auth, validation, IPC to the runner, normalisation, JSON) against
 * node-llama-cpp's embedding context on the same model and inputs in a process of its own,
 * alternating, with the model loaded in both. `node dist/bench/embeddings.js` runs it alone.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { EmbeddingList } from '../src/api/embeddings.js';
import { defaultThreads } from '../src/config.js';
import { writeGgufFile } from '../src/engine/gguf-writer.js';
import { BENCH_MODEL, buildSyntheticModel } from '../src/engine/synthetic-model.js';
import { api } from '../test/helpers/service.js';
import { log, median, runs, startService, type Figure, type TestService } from './lib.js';

const EMBED_INPUTS = 32;
const WORDS = ['river', 'stone', 'light', 'market', 'winter', 'garden', 'signal', 'copper', 'harbor', 'forest', 'engine', 'silver'];

/** Sentences of about 50 tokens each, the same every run. */
function inputs(): string[] {
  return Array.from({ length: EMBED_INPUTS }, (_, index) =>
    Array.from({ length: 9 }, (__, word) => WORDS[(index * 7 + word * 5) % WORDS.length]).join(' '));
}

function direct(modelPath: string, inputsPath: string): Promise<number> {
  const script = fileURLToPath(new URL('./direct-embed.js', import.meta.url));
  const child = spawn(process.execPath, [script, modelPath, inputsPath, String(defaultThreads()), '1'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) => child.on('exit', (code) => {
    if (code !== 0) return reject(new Error(`direct embedding exited with ${code}`));
    resolve((JSON.parse(output.trim()) as { embeddingsPerSecond: number }).embeddingsPerSecond);
  }));
}

async function throughService(service: TestService, texts: string[]): Promise<EmbeddingList> {
  const response = await api(service, '/v1/embeddings', { method: 'POST', json: { model: 'bench', input: texts } });
  if (response.status !== 200) throw new Error(`POST /v1/embeddings answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as EmbeddingList;
}

export async function benchEmbeddings(): Promise<Figure> {
  const service = await startService({ env: { LMSP_LOG_LEVEL: 'warn' } });
  try {
    const modelPath = join(service.dataDir, 'models', 'bench.gguf');
    writeGgufFile(modelPath, buildSyntheticModel(BENCH_MODEL));
    const registered = await api(service, '/v1/models', { method: 'POST', json: { path: 'bench.gguf', id: 'bench' } });
    if (registered.status !== 201) throw new Error(`cannot register the benchmark model: ${registered.status}`);
    const texts = inputs();
    const inputsPath = join(service.dataDir, 'bench-inputs.json');
    writeFileSync(inputsPath, JSON.stringify(texts));
    await throughService(service, texts.slice(0, 1)); // loads the model
    const viaService: number[] = [];
    const viaDirect: number[] = [];
    for (let run = 0; run < runs(); run++) {
      const started = performance.now();
      const list = await throughService(service, texts);
      viaService.push(list.data.length / ((performance.now() - started) / 1000));
      // The service keeps its model loaded meanwhile, as it would between requests.
      viaDirect.push(await direct(modelPath, inputsPath));
      log(`embeddings run ${run + 1}: service ${viaService.at(-1)!.toFixed(1)}/s, direct ${viaDirect.at(-1)!.toFixed(1)}/s (${list.usage.prompt_tokens / list.data.length} tokens each)`);
    }
    const value = median(viaService);
    const baseline = median(viaDirect);
    return {
      name: 'Embeddings (embeddings/s)',
      value, baseline, unit: '/s', ratio: value / baseline, target: '>= 0.9', met: value / baseline >= 0.9,
      how: `one POST /v1/embeddings of ${EMBED_INPUTS} sentences of about 50 tokens, ${BENCH_MODEL.embedding} wide ${BENCH_MODEL.layers}-layer ${BENCH_MODEL.tensorType} model, ${defaultThreads()} thread(s): through the service over HTTP vs node-llama-cpp's embedding context directly`,
      samples: { value: viaService, baseline: viaDirect },
    };
  } finally {
    await service.kill();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  const figure = await benchEmbeddings();
  console.log(JSON.stringify(figure));
}
