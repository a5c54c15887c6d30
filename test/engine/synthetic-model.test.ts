import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { readGgufFileInfo } from 'node-llama-cpp';
import { encodeGgufHeader, toHalf, writeGgufFile, GGUF_ALIGNMENT } from '../../src/engine/gguf-writer.js';
import { buildSyntheticModel, LMSP_TINY, SYNTHETIC_VOCABULARY_SIZE, syntheticModelFacts } from '../../src/engine/synthetic-model.js';
import { readGgufFacts } from '../../src/models/gguf.js';
import { withDataDir } from '../helpers/data-dir.js';

/** lmsp-tiny's digest: its bytes are the same on every machine (LMSP section 5). */
const LMSP_TINY_DIGEST = 'sha256:140904b36785e81b7059229c2847f77ebdbdc962cc4c3b8e499a9d847f2065ad';

describe('the GGUF writer and lmsp-tiny (LMSP section 5)', () => {
  test('lmsp-tiny has the same bytes every time, and the pinned digest', () => withDataDir((dir) => {
    const a = join(dir, 'a.gguf');
    const b = join(dir, 'b.gguf');
    writeGgufFile(a, buildSyntheticModel(LMSP_TINY));
    writeGgufFile(b, buildSyntheticModel(LMSP_TINY));
    const bytes = readFileSync(a);
    assert.deepEqual(bytes, readFileSync(b));
    assert.equal(`sha256:${createHash('sha256').update(bytes).digest('hex')}`, LMSP_TINY_DIGEST);
    assert.ok(statSync(a).size < 600_000, 'a small model');
  }));

  test('the file is GGUF v3 with the metadata llama.cpp needs and a 16384-token context', () => withDataDir(async (dir) => {
    const path = join(dir, 'tiny.gguf');
    writeGgufFile(path, buildSyntheticModel(LMSP_TINY));
    const info = await readGgufFileInfo(path, { readTensorInfo: true });
    assert.equal(info.version, 3);
    const metadata = info.metadata as unknown as Record<string, Record<string, unknown>>;
    assert.equal(metadata.general!.architecture, 'llama');
    const llama = metadata.llama!;
    for (const key of ['context_length', 'embedding_length', 'block_count', 'feed_forward_length']) assert.equal(typeof llama[key], 'number', key);
    assert.equal(llama.context_length, 16384);
    const tokenizer = (metadata.tokenizer as { ggml: Record<string, unknown> }).ggml;
    assert.equal(tokenizer.model, 'llama');
    const tokens = tokenizer.tokens as string[];
    assert.equal(tokens.length, SYNTHETIC_VOCABULARY_SIZE);
    assert.deepEqual(tokens.slice(0, 4), ['<unk>', '<s>', '</s>', '<0x00>']);
    assert.ok(tokens.includes('\u2581'), 'a normal token for spaces');
    assert.equal((tokenizer.token_type as number[])[3], 6, 'byte tokens have type 6');
    for (const tensor of info.fullTensorInfo ?? []) assert.equal(Number(tensor.offset) % GGUF_ALIGNMENT, 0, `${tensor.name} is aligned`);
    const facts = await readGgufFacts(path);
    assert.deepEqual(facts, { architecture: 'llama', contextLength: 16384, parameters: facts.parameters, quantization: 'F32', tokenizer: 'llama' });
    assert.ok(facts.parameters! > 100_000);
    assert.deepEqual(syntheticModelFacts(LMSP_TINY), facts, 'the facts the registry records without reading the file are what the reader says');
  }));

  test('the header is padded to the alignment', () => {
    const header = encodeGgufHeader(buildSyntheticModel(LMSP_TINY));
    assert.equal(header.length % GGUF_ALIGNMENT, 0);
    assert.equal(header.subarray(0, 4).toString('latin1'), 'GGUF');
    assert.equal(header.readUInt32LE(4), 3);
  });

  test('toHalf rounds to the nearest binary16', () => {
    assert.equal(toHalf(0), 0);
    assert.equal(toHalf(1), 0x3c00);
    assert.equal(toHalf(-2), 0xc000);
    assert.equal(toHalf(65504), 0x7bff);
    assert.equal(toHalf(1e6), 0x7c00);
    assert.equal(toHalf(Number.NaN) & 0x7c00, 0x7c00);
    assert.equal(toHalf(5.960464477539063e-8), 0x0001, 'the smallest subnormal');
    assert.equal(toHalf(0.1), 0x2e66);
  });
});
