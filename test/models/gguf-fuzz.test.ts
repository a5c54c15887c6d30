/**
 * LMSP 5, "no file can crash the service, hang it, or make it allocate more than a small multiple
 * of the file's size": property-based tests of the GGUF validator. Valid files (lmsp-tiny and a
 * smaller synthetic model) are mutated: bytes flipped, the file truncated, bytes inserted, length
 * and count fields set to huge values, type fields overwritten; and random bytes follow a valid
 * magic and version. For every case, either the validator refuses it with `invalid_model_file`,
 * or it accepts it and node-llama-cpp's GGUF reader then reads it without throwing. Never
 * another error, never a path in a message, never more than HEAP_BOUND bytes of heap growth
 * around one validation, never a validation that outlives HANG_DEADLINE_MS.
 *
 * LMSP_FUZZ_RUNS raises the number of cases per property (default small enough for `npm test`);
 * the default runs use a fixed seed, so they are the same every time; LMSP_FUZZ_SEED picks one.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { after, before, describe, test, type TestContext } from 'node:test';
import fc from 'fast-check';
import { readGgufFileInfo } from 'node-llama-cpp';
import { ServiceError } from '../../src/domain/errors.js';
import { validateGgufFile } from '../../src/models/gguf-validator.js';
import { makeDataDir } from '../helpers/data-dir.js';
import { mapHeader, smallBytes, tinyBytes, writeModel } from '../helpers/gguf.js';
import { applyMutations, mutationArbitrary, randomAfterMagic } from '../helpers/gguf-mutations.js';

const RUNS = Math.max(1, Number(process.env.LMSP_FUZZ_RUNS ?? 40));
const SEED = process.env.LMSP_FUZZ_SEED !== undefined ? Number(process.env.LMSP_FUZZ_SEED)
  : process.env.LMSP_FUZZ_RUNS === undefined ? 0x67677566 : Math.floor(Math.random() * 2 ** 31);
/**
 * Heap (JS heap plus buffers outside it) a single validation may add. The validator keeps a
 * 128 KiB window and what a header of at most 600 KB implies; 64 MB is far above that and far
 * below the gigabytes the crafted files once cost, so it tells a bound from no bound.
 */
const HEAP_BOUND = 64 * 1024 * 1024;
/** Only a hang detector: a validation of these files takes milliseconds. */
const HANG_DEADLINE_MS = 30_000;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as (options?: { type: 'minor' | 'major' }) => void;
/**
 * A minor collection before each measurement clears the young garbage of the case before, which
 * is where a validation's own allocations live; a major one per case would cost more than the
 * case (what the validator kept would survive either, so the bound holds).
 */
const collectGarbage = () => gc({ type: 'minor' });
const heapInUse = () => {
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.external;
};

async function withinDeadline<T>(work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${HANG_DEADLINE_MS} ms`)), HANG_DEADLINE_MS);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

interface Tally { accepted: number; rejected: number; maxGrowth: number }

let dir = '';
before(() => {
  dir = makeDataDir('gguf-fuzz');
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** The property every case must hold; counts whether the validator accepted the file. */
async function checkCase(bytes: Uint8Array, tally: Tally): Promise<void> {
  const path = writeModel(dir, 'case.gguf', bytes);
  collectGarbage();
  const before = heapInUse();
  let accepted: boolean;
  try {
    await withinDeadline(validateGgufFile(path), 'a validation');
    accepted = true;
  } catch (error) {
    if (!(error instanceof ServiceError) || error.code !== 'invalid_model_file') throw error;
    assert.ok(!error.message.includes(dir), `no path in "${error.message}"`);
    accepted = false;
  }
  const growth = heapInUse() - before;
  tally.maxGrowth = Math.max(tally.maxGrowth, growth);
  assert.ok(growth < HEAP_BOUND, `one validation grew the heap by ${growth} bytes`);
  if (accepted) {
    tally.accepted++;
    await withinDeadline(readGgufFileInfo(path, { readTensorInfo: true, logWarnings: false }), 'node-llama-cpp reading an accepted file');
  } else {
    tally.rejected++;
  }
}

function report(t: TestContext, tally: Tally): void {
  t.diagnostic(`${RUNS} runs (seed ${SEED}): ${tally.accepted} accepted, ${tally.rejected} rejected, max heap growth ${tally.maxGrowth} bytes`);
}

function mutantsOf(name: string, original: () => Buffer) {
  return async (t: TestContext) => {
    const bytes = original();
    const map = mapHeader(bytes);
    const tally: Tally = { accepted: 0, rejected: 0, maxGrowth: 0 };
    await checkCase(bytes, tally);
    assert.equal(tally.accepted, 1, `the unmutated ${name} is accepted`);
    await fc.assert(fc.asyncProperty(fc.array(mutationArbitrary(bytes.length, map), { minLength: 1, maxLength: 4 }),
      (mutations) => checkCase(applyMutations(bytes, mutations), tally)), { numRuns: RUNS, seed: SEED });
    report(t, tally);
    // Most flips land in tensor data and keep a file valid; most header damage does not.
    assert.ok(tally.accepted > 1 && tally.rejected > 0, `both outcomes occur (${tally.accepted} accepted, ${tally.rejected} rejected)`);
  };
}

describe('GGUF validator under fuzzing (LMSP 5: a model file is untrusted input)', () => {
  test('mutants of a small synthetic model: refused, or readable by node-llama-cpp', mutantsOf('small model', smallBytes));

  test('mutants of lmsp-tiny: refused, or readable by node-llama-cpp', mutantsOf('lmsp-tiny', tinyBytes));

  test('random bytes after a valid magic and version are refused without a crash, a hang or a heap blow-up', async (t) => {
    const tally: Tally = { accepted: 0, rejected: 0, maxGrowth: 0 };
    await fc.assert(fc.asyncProperty(randomAfterMagic(), (bytes) => checkCase(bytes, tally)), { numRuns: RUNS, seed: SEED });
    report(t, tally);
    assert.equal(tally.accepted + tally.rejected, RUNS);
    assert.ok(tally.rejected > 0);
  });
});
