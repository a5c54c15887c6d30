/**
 * Embeddings: embeddings per second of one request of EMBED_INPUTS inputs through the runner
 * (RunnerPool.embed: IPC, validation, normalisation) against node-llama-cpp's embedding context
 * on the same model and inputs in a process of its own, alternating, with the model loaded in
 * both. `node dist/bench/embeddings.js` runs it alone.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { defaultThreads } from '../src/config.js';
import { writeGgufFile } from '../src/engine/gguf-writer.js';
import { RunnerPool } from '../src/engine/runner-pool.js';
import { BENCH_MODEL, buildSyntheticModel } from '../src/engine/synthetic-model.js';
import { makeDataDir } from '../test/helpers/data-dir.js';
import { log, median, runs, type Figure } from './lib.js';

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

export async function benchEmbeddings(): Promise<Figure> {
  const dir = makeDataDir('bench-embeddings');
  const modelPath = join(dir, 'bench.gguf');
  writeGgufFile(modelPath, buildSyntheticModel(BENCH_MODEL));
  const model = { id: 'bench', path: modelPath, digest: `sha256:${createHash('sha256').update(readFileSync(modelPath)).digest('hex')}` };
  const texts = inputs();
  const inputsPath = join(dir, 'inputs.json');
  writeFileSync(inputsPath, JSON.stringify(texts));
  const engine = new RunnerPool({
    slots: 1, maxLoadedModels: 1, keepAliveMs: Infinity,
    settings: { gpu: 'cpu', threads: defaultThreads(), stateDir: join(dir, 'state'), tokenDelayMs: 0 },
    debug: { loadDelayMs: 0, tokenDelayMs: 0, cancelDelayMs: 0, dbMaxPages: 0 },
  });
  try {
    await engine.embed(model, { inputs: texts.slice(0, 1) }); // loads the model
    const viaRunner: number[] = [];
    const viaDirect: number[] = [];
    for (let run = 0; run < runs(); run++) {
      const started = performance.now();
      const result = await engine.embed(model, { inputs: texts });
      viaRunner.push(result.embeddings.length / ((performance.now() - started) / 1000));
      viaDirect.push(await direct(modelPath, inputsPath));
      log(`embeddings run ${run + 1}: runner ${viaRunner.at(-1)!.toFixed(1)}/s, direct ${viaDirect.at(-1)!.toFixed(1)}/s (${result.promptTokens[0]} tokens each)`);
    }
    const value = median(viaRunner);
    const baseline = median(viaDirect);
    return {
      name: 'Embeddings (embeddings/s)',
      value, baseline, unit: '/s', ratio: value / baseline, target: '>= 0.9', met: value / baseline >= 0.9,
      how: `one request of ${EMBED_INPUTS} sentences of about 50 tokens, ${BENCH_MODEL.embedding} wide ${BENCH_MODEL.layers}-layer ${BENCH_MODEL.tensorType} model, ${defaultThreads()} thread(s): through the runner vs node-llama-cpp's embedding context directly`,
      samples: { value: viaRunner, baseline: viaDirect },
    };
  } finally {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  const figure = await benchEmbeddings();
  console.log(JSON.stringify(figure));
}
