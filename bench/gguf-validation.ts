/**
 * GGUF validation (LMSP 5): the service validates every model file before registering or loading
 * it. This measures, side by side on the same file, the validator against node-llama-cpp's GGUF
 * reader (what registration ran before): time to read a header with a 256,000-token vocabulary,
 * the size of a real model's tokenizer, and the peak memory each adds to a fresh process.
 *
 * Run as a script (`node dist/bench/gguf-validation.js validator|reader PATH`), it reads the file
 * once and prints how much its peak resident memory grew, as a JSON line.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readGgufFileInfo } from 'node-llama-cpp';
import { writeGgufFile, type GgufFile } from '../src/engine/gguf-writer.js';
import { validateGgufFile } from '../src/models/gguf-validator.js';
import { fileURLToPath } from 'node:url';
import { firstJsonLine, log, median, runs, spawnScript, type Figure } from './lib.js';

const VOCABULARY = 256_000;

/** A file whose header is all tokenizer: the part of a real model that makes headers large. */
function largeVocabularyModel(): GgufFile {
  const tokens = Array.from({ length: VOCABULARY }, (_, index) => `token-${index.toString(36)}`);
  return {
    metadata: [
      ['general.architecture', { type: 'string', value: 'llama' }],
      ['llama.context_length', { type: 'u32', value: 8192 }],
      ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
      ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', values: tokens }],
      ['tokenizer.ggml.scores', { type: 'array', itemType: 'f32', values: tokens.map(() => 0) }],
      ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', values: tokens.map(() => 1) }],
      ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', values: tokens.slice(0, 200_000).map((token) => `${token} x`) }],
    ],
    tensors: [{ name: 'token_embd.weight', dims: [64, 64], type: 'f32', values: () => new Float32Array(64 * 64) }],
  };
}

type Reader = 'validator' | 'reader';

function readOnce(reader: Reader, path: string): Promise<unknown> {
  return reader === 'validator' ? validateGgufFile(path) : readGgufFileInfo(path, { readTensorInfo: true, logWarnings: false });
}

async function timed(reader: Reader, path: string): Promise<number> {
  const started = performance.now();
  await readOnce(reader, path);
  return performance.now() - started;
}

/** Peak resident memory a single read adds to a fresh process that loaded both modules. */
async function peakGrowthMiB(reader: Reader, path: string): Promise<number> {
  const child = spawnScript('gguf-validation', [reader, path]);
  const { grownKiB } = await firstJsonLine<{ grownKiB: number }>(child);
  return grownKiB / 1024;
}

export async function benchGgufValidation(): Promise<Figure[]> {
  const dir = mkdtempSync(join(tmpdir(), 'lmsp-bench-gguf-'));
  try {
    const path = join(dir, 'vocabulary.gguf');
    writeGgufFile(path, largeVocabularyModel());
    const header = (await validateGgufFile(path)).dataOffset;
    log(`gguf-validation: a ${(statSync(path).size / 1024 ** 2).toFixed(1)} MiB file, header ${(header / 1024 ** 2).toFixed(1)} MiB`);
    const ours = { ms: [] as number[], peak: [] as number[] };
    const theirs = { ms: [] as number[], peak: [] as number[] };
    // Warm both up once, then alternate, so that neither gets the warmer cache or JIT.
    await timed('validator', path);
    await timed('reader', path);
    for (let run = 0; run < Math.max(5, runs()); run++) {
      ours.ms.push(await timed('validator', path));
      theirs.ms.push(await timed('reader', path));
      log(`gguf-validation run ${run + 1}: validator ${ours.ms.at(-1)!.toFixed(1)} ms, node-llama-cpp ${theirs.ms.at(-1)!.toFixed(1)} ms`);
    }
    for (let run = 0; run < runs(); run++) {
      ours.peak.push(await peakGrowthMiB('validator', path));
      theirs.peak.push(await peakGrowthMiB('reader', path));
      log(`gguf-validation peak ${run + 1}: validator +${ours.peak.at(-1)!.toFixed(1)} MiB, node-llama-cpp +${theirs.peak.at(-1)!.toFixed(1)} MiB`);
    }
    const time = { value: median(ours.ms), baseline: median(theirs.ms) };
    const peak = { value: median(ours.peak), baseline: median(theirs.peak) };
    return [
      {
        name: 'Validating a GGUF header of 256,000 tokens',
        ...time,
        unit: 'ms',
        ratio: time.value / time.baseline,
        target: '<= 1x the reader it replaced',
        met: time.value <= time.baseline,
        how: 'validateGgufFile against node-llama-cpp readGgufFileInfo (with tensor infos) on the same file, alternating, in one process',
        samples: { value: ours.ms, baseline: theirs.ms },
        extra: { header_mib: Number((header / 1024 ** 2).toFixed(1)) },
      },
      {
        name: 'Peak memory added by validating that header',
        ...peak,
        unit: 'MiB',
        ratio: peak.value / Math.max(peak.baseline, 0.1),
        target: '<= the header\'s size',
        met: peak.value <= header / 1024 ** 2,
        how: 'growth of maxRSS in a fresh process that loaded both modules, around one call, against readGgufFileInfo in the same setup',
        samples: { value: ours.peak, baseline: theirs.peak },
      },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [reader, path] = process.argv.slice(2) as [Reader, string];
  const before = process.resourceUsage().maxRSS;
  await readOnce(reader, path);
  process.stdout.write(`${JSON.stringify({ grownKiB: process.resourceUsage().maxRSS - before })}\n`);
}
