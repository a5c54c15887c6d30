/**
 * LMSP 5, "a model file is untrusted input": one test per rule of the GGUF validator. Valid files
 * come from the project's own writer; each case corrupts bytes at a known offset (found by an
 * independent walk of the header) or writes the file with one thing wrong, and expects
 * `invalid_model_file` naming the fault, never a path.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ServiceError } from '../../src/domain/errors.js';
import type { GgufFile, GgufTensor, GgufValue } from '../../src/engine/gguf-writer.js';
import { buildSyntheticModel, LMSP_TINY } from '../../src/engine/synthetic-model.js';
import { readGgufFacts } from '../../src/models/gguf.js';
import { FileChangedError, FileCursor } from '../../src/models/gguf-cursor.js';
import { validateGgufFile } from '../../src/models/gguf-validator.js';
import { makeDataDir } from '../helpers/data-dir.js';
import { ggufBytes, mapHeader, SMALL_MODEL, smallBytes, tinyBytes, writeModel } from '../helpers/gguf.js';

let dir = '';
before(() => {
  dir = makeDataDir('gguf-validator');
  mkdirSync(dir, { recursive: true });
});
after(() => rmSync(dir, { recursive: true, force: true }));

let counter = 0;
const place = (bytes: Uint8Array) => writeModel(dir, `case-${counter++}.gguf`, bytes);

async function rejects(bytes: Uint8Array, pattern: RegExp): Promise<void> {
  const path = place(bytes);
  await assert.rejects(validateGgufFile(path), (error: unknown) => {
    assert.ok(error instanceof ServiceError, String(error));
    assert.equal(error.code, 'invalid_model_file');
    assert.equal(error.param, 'path');
    assert.match(error.message, pattern);
    assert.ok(!error.message.includes(dir), `no path in "${error.message}"`);
    return true;
  });
}

const accepts = (bytes: Uint8Array) => validateGgufFile(place(bytes));

/** The small model with its metadata edited. */
function small(edit: (metadata: Array<readonly [string, GgufValue]>) => void, tensors?: (list: GgufTensor[]) => GgufTensor[]): Buffer {
  const file = buildSyntheticModel(SMALL_MODEL);
  const metadata = [...file.metadata];
  edit(metadata);
  const edited: GgufFile = { metadata, tensors: tensors ? tensors([...file.tensors]) : file.tensors };
  return ggufBytes(edited);
}

function withValue(key: string, value: GgufValue | null) {
  return (metadata: Array<readonly [string, GgufValue]>) => {
    const index = metadata.findIndex(([name]) => name === key);
    if (index >= 0) metadata.splice(index, 1);
    if (value) metadata.push([key, value]);
  };
}

function patch(bytes: Buffer, change: (copy: Buffer) => void): Buffer {
  const copy = Buffer.from(bytes);
  change(copy);
  return copy;
}

/**
 * Adds one metadata entry whose encoded size is a multiple of 32, the writer's alignment, so the
 * data section moves with it and the file stays valid apart from what the entry holds.
 */
function withRawEntry(bytes: Buffer, key: string, typeAndValue: Buffer): Buffer {
  const map = mapHeader(bytes);
  let padded = key;
  while ((8 + padded.length + typeAndValue.length) % 32 !== 0) padded += 'x';
  const entry = Buffer.alloc(8 + padded.length);
  entry.writeBigUInt64LE(BigInt(padded.length));
  entry.write(padded, 8, 'latin1');
  const firstTensor = [...map.tensors.values()][0]!.at;
  const result = Buffer.concat([bytes.subarray(0, firstTensor), entry, typeAndValue, bytes.subarray(firstTensor)]);
  result.writeBigUInt64LE(result.readBigUInt64LE(16) + 1n, 16);
  return result;
}

/** An array value nested `depth` deep whose innermost array holds two uint8 items. */
function nestedArray(depth: number): Buffer {
  let inner = Buffer.from([0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 7, 9]); // uint8 x 2
  for (let level = 1; level < depth; level++) {
    const header = Buffer.alloc(12);
    header.writeUInt32LE(9, 0);
    header.writeBigUInt64LE(1n, 4);
    inner = Buffer.concat([header, inner]);
  }
  const type = Buffer.alloc(4);
  type.writeUInt32LE(9);
  return Buffer.concat([type, inner]);
}

describe('GGUF validator (LMSP 5: a model file is untrusted input)', () => {
  test('a valid file passes and yields the facts the registry records', async () => {
    const bytes = smallBytes();
    const map = mapHeader(bytes);
    const structure = await accepts(bytes);
    const file = buildSyntheticModel(SMALL_MODEL);
    const parameters = file.tensors.reduce((sum, tensor) => sum + tensor.dims.reduce((product, dim) => product * dim, 1), 0);
    assert.deepEqual(structure, {
      version: 3, architecture: 'llama', contextLength: 256, fileType: 0, alignment: 32, tokenizerModel: 'llama',
      hasChatTemplate: false, parameters, tensorCount: file.tensors.length, metadataCount: file.metadata.length,
      dataOffset: Math.ceil(map.headerEnd / 32) * 32,
    });
    const tiny = await accepts(tinyBytes());
    assert.equal(tiny.contextLength, LMSP_TINY.contextLength);
    const templated = await accepts(ggufBytes(buildSyntheticModel({ ...SMALL_MODEL, chatTemplate: '{{ messages }}' })));
    assert.equal(templated.hasChatTemplate, true);
  });

  test('readGgufFacts names the quantization from general.file_type', async () => {
    const facts = await readGgufFacts(place(small(withValue('general.file_type', { type: 'u32', value: 15 }))));
    assert.deepEqual(facts, { architecture: 'llama', contextLength: 256, parameters: facts.parameters, quantization: 'Q4_K_M', tokenizer: 'llama' });
    assert.equal((await readGgufFacts(place(small(withValue('general.file_type', { type: 'u32', value: 99 }))))).quantization, 'type_99');
    assert.equal((await readGgufFacts(place(small(withValue('general.file_type', null))))).quantization, null);
  });

  test('magic, size and version', async () => {
    await rejects(Buffer.alloc(0), /the file is empty/);
    await rejects(Buffer.from('GGUF\x03\x00\x00\x00'), /too short to be GGUF \(8 bytes\)/);
    await rejects(patch(smallBytes(), (b) => b.write('GGML', 0, 'latin1')), /does not start with the GGUF magic/);
    await rejects(patch(smallBytes(), (b) => b.writeUInt32LE(1, 4)), /GGUF version 1 is not supported \(2 or 3\)/);
    await rejects(patch(smallBytes(), (b) => b.writeUInt32LE(4, 4)), /GGUF version 4 is not supported/);
    await rejects(patch(smallBytes(), (b) => b.writeUInt32LE(0x03000000, 4)), /a big-endian file\?/);
    assert.equal((await accepts(patch(smallBytes(), (b) => b.writeUInt32LE(2, 4)))).version, 2, 'version 2 has the same layout');
  });

  test('tensor and metadata counts are bounded, by a fixed cap and by the bytes that remain', async () => {
    await rejects(patch(smallBytes(), (b) => b.writeBigUInt64LE(16_385n, 8)), /tensor count 16385 is not plausible \(at most 16384\)/);
    await rejects(patch(smallBytes(), (b) => b.writeBigUInt64LE(4_097n, 16)), /metadata count 4097 is not plausible \(at most 4096\)/);
    await rejects(patch(smallBytes(), (b) => b.writeBigUInt64LE(2n ** 40n, 16)), /metadata count 1099511627776 is not plausible/);
    await rejects(patch(smallBytes(), (b) => b.writeBigUInt64LE(2n ** 64n - 1n, 16)), /metadata count more than 2\^53 is not plausible/);
    await rejects(patch(smallBytes(), (b) => b.writeBigUInt64LE(10_000n, 8)), /declares 10000 tensors but only \d+ bytes remain for their infos/);
  });

  test('every key is 1 to 65535 bytes of printable ASCII, within the file, and unique', async () => {
    const bytes = tinyBytes();
    const map = mapHeader(bytes);
    const name = map.keys.get('general.name')!;
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(0n, 24)), /metadata key #0 at byte 24 is empty/);
    await rejects(patch(bytes, (b) => { b[name.at + 8] = 0xff; }), new RegExp(`metadata key #1 at byte ${name.at} is not printable ASCII`));
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(70_000n, name.at)), new RegExp(`metadata key #1 at byte ${name.at} declares 70000 bytes \\(at most 65535\\)`));
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(3_500_000_000n, name.at)),
      new RegExp(`metadata key #1 at byte ${name.at} declares 3500000000 bytes but only ${bytes.length - name.at - 8} remain`));
    await rejects(small((metadata) => metadata.push(['general.name', { type: 'string', value: 'again' }])), /the metadata key "general.name" at byte \d+ appears twice/);
  });

  test('every value type is one of the 13 known, bools are 0 or 1, strings lie within the file', async () => {
    const bytes = smallBytes();
    const map = mapHeader(bytes);
    const name = map.keys.get('general.name')!;
    const addBos = map.keys.get('tokenizer.ggml.add_bos_token')!;
    const tokens = map.keys.get('tokenizer.ggml.tokens')!;
    await rejects(patch(bytes, (b) => b.writeUInt32LE(13, name.typeAt)), new RegExp(`the value of "general.name" at byte ${name.valueAt} has unknown type 13 \\(0 to 12\\)`));
    await rejects(patch(bytes, (b) => { b[addBos.valueAt] = 2; }), new RegExp(`the bool in "tokenizer.ggml.add_bos_token" at byte ${addBos.valueAt} is 2, not 0 or 1`));
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(10n ** 15n, name.valueAt)), /the string value of "general.name" at byte \d+ declares 1000000000000000 bytes but only \d+ remain/);
    await rejects(patch(bytes, (b) => b.writeUInt32LE(13, tokens.valueAt)), /the array "tokenizer.ggml.tokens" at byte \d+ has items of unknown type 13/);
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(2n ** 32n, tokens.valueAt + 4)),
      /the array "tokenizer.ggml.tokens" at byte \d+ declares 4294967296 items of string, at least 34359738368 bytes, but only \d+ remain/);
    // The third token's length, declaring more than the file holds.
    const thirdToken = tokens.valueAt + 12 + (8 + 5) + (8 + 3);
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(10n ** 12n, thirdToken)), /item 2 of "tokenizer.ggml.tokens" at byte \d+ declares 1000000000000 bytes but only \d+ remain/);
    const bools = small(withValue('x.flags', { type: 'array', itemType: 'bool', values: [true, false, true] }));
    await accepts(bools);
    const flags = mapHeader(bools).keys.get('x.flags')!;
    await rejects(patch(bools, (b) => { b[flags.valueAt + 12 + 1] = 7; }), /the bool in "x.flags" at byte \d+ is 7, not 0 or 1/);
  });

  test('no array of arrays: llama.cpp reads none', async () => {
    await accepts(withRawEntry(smallBytes(), 'x.flat', nestedArray(1)));
    await rejects(withRawEntry(smallBytes(), 'x.nested', nestedArray(2)), /the value of "x.nested[x]*" at byte \d+ is an array of arrays, which llama.cpp cannot read/);
    await rejects(withRawEntry(smallBytes(), 'x.nested', nestedArray(100)), /is an array of arrays/);
    // Empty, too: llama.cpp refuses the item type, whatever the count.
    const emptyOfArrays = Buffer.alloc(16);
    emptyOfArrays.writeUInt32LE(9, 0);
    emptyOfArrays.writeUInt32LE(9, 4);
    await rejects(withRawEntry(smallBytes(), 'x.empty', emptyOfArrays), /the value of "x.empty[x]*" at byte \d+ is an array of arrays/);
  });

  test('general.alignment, when present, is a uint32 power of two that every tensor offset honours', async () => {
    assert.equal((await accepts(small(withValue('general.alignment', { type: 'u32', value: 32 })))).alignment, 32);
    await rejects(small(withValue('general.alignment', { type: 'u32', value: 48 })), /general.alignment at byte \d+ is 48, not a power of two/);
    await rejects(small(withValue('general.alignment', { type: 'u32', value: 0 })), /general.alignment at byte \d+ is 0, not a power of two/);
    await rejects(small(withValue('general.alignment', { type: 'u64', value: 32 })), /general.alignment must be a uint32, not uint64/);
    await rejects(small(withValue('general.alignment', { type: 'u32', value: 64 })), /tensor "[^"]+" has offset \d+, not a multiple of the alignment 64/);
  });

  test('general.architecture is present and a short lowercase name', async () => {
    await rejects(small(withValue('general.architecture', null)), /general.architecture is missing/);
    await rejects(small(withValue('general.architecture', { type: 'u32', value: 1 })), /general.architecture has type uint32, not string/);
    await rejects(small(withValue('general.architecture', { type: 'string', value: 'Llama 2' })), /general.architecture "Llama 2" is not an architecture name/);
    await rejects(small(withValue('general.architecture', { type: 'string', value: 'l'.repeat(100) })), /general.architecture is 100 bytes long \(at most 64\)/);
    assert.equal((await accepts(small(withValue('general.architecture', { type: 'string', value: 'gpt-oss' })))).contextLength, null,
      'the context length is the architecture\'s own');
  });

  test("the architecture's context length is at least 1 and fits llama.cpp's signed 32 bits", async () => {
    await rejects(small(withValue('llama.context_length', { type: 'u32', value: 2 ** 32 - 1 })), /llama.context_length is 4294967295 \(1 to 2147483647\)/);
    await rejects(small(withValue('llama.context_length', { type: 'u32', value: 0 })), /llama.context_length is 0 \(1 to 2147483647\)/);
    await rejects(small(withValue('llama.context_length', { type: 'i32', value: -5 })), /llama.context_length is -5 \(1 to 2147483647\)/);
    await rejects(small(withValue('llama.context_length', { type: 'u64', value: 2n ** 60n })), /llama.context_length is beyond 2\^53 \(1 to 2147483647\)/);
    await rejects(small(withValue('llama.context_length', { type: 'u64', value: 2n ** 31n })), /llama.context_length is 2147483648/);
    assert.equal((await accepts(small(withValue('llama.context_length', { type: 'u32', value: 2 ** 31 - 1 })))).contextLength, 2 ** 31 - 1);
  });

  test("the architecture's context length is a uint32, the only type llama.cpp loads", async () => {
    await rejects(small(withValue('llama.context_length', { type: 'u64', value: 16384n })), /llama.context_length must be a uint32, not uint64/);
    await rejects(small(withValue('llama.context_length', { type: 'i32', value: 16384 })), /llama.context_length must be a uint32, not int32/);
    await rejects(small(withValue('llama.context_length', { type: 'string', value: '16384' })), /llama.context_length must be a uint32, not string/);
    await rejects(small(withValue('llama.context_length', { type: 'f32', value: 16384 })), /llama.context_length must be a uint32, not float32/);
    // Another architecture's key is not read by llama.cpp: any type.
    await accepts(small(withValue('gpt2.context_length', { type: 'string', value: 'long' })));
  });

  test('a part of a split model is refused', async () => {
    await rejects(small(withValue('split.count', { type: 'u16', value: 3 })), /part of a split model \(split.count 3\)/);
    await accepts(small(withValue('split.count', { type: 'u16', value: 1 })));
  });

  test('tensor names are 1 to 63 bytes and unique', async () => {
    await rejects(small(() => undefined, () => []), /it holds no tensors/);
    const bytes = smallBytes();
    const first = mapHeader(bytes).tensors.get('token_embd.weight')!;
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(0n, first.at)), new RegExp(`tensor #0 at byte ${first.at} has an empty name`));
    await rejects(small(() => undefined, (list) => [{ ...list[0]!, name: 'n'.repeat(64) }, ...list.slice(1)]), /the name of tensor #0 at byte \d+ declares 64 bytes \(at most 63\)/);
    await rejects(small(() => undefined, (list) => [list[0]!, { ...list[1]!, name: list[0]!.name }, ...list.slice(2)]), /two tensors are named "token_embd.weight"/);
  });

  test('tensor shapes: 1 to 4 dimensions, each > 0, an exact element count', async () => {
    const bytes = smallBytes();
    const embd = mapHeader(bytes).tensors.get('token_embd.weight')!;
    await rejects(patch(bytes, (b) => b.writeUInt32LE(0, embd.dimsAt)), /tensor "token_embd.weight" at byte \d+ has 0 dimensions \(1 to 4\)/);
    await rejects(patch(bytes, (b) => b.writeUInt32LE(5, embd.dimsAt)), /has 5 dimensions \(1 to 4\)/);
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(0n, embd.dimAt[1]!)), /tensor "token_embd.weight" at byte \d+ has a dimension of 0/);
    await rejects(patch(bytes, (b) => { b.writeBigUInt64LE(2n ** 40n, embd.dimAt[0]!); b.writeBigUInt64LE(2n ** 40n, embd.dimAt[1]!); }),
      /tensor "token_embd.weight" at byte \d+ has dimensions 1099511627776 x 1099511627776, too many elements/);
  });

  test('tensor types are known ggml types whose block divides the rows', async () => {
    const bytes = smallBytes();
    const embd = mapHeader(bytes).tensors.get('token_embd.weight')!;
    await rejects(patch(bytes, (b) => b.writeUInt32LE(4, embd.typeAt)), /tensor "token_embd.weight" at byte \d+ has unknown ggml type 4/);
    await rejects(patch(bytes, (b) => b.writeUInt32LE(99, embd.typeAt)), /has unknown ggml type 99/);
    await rejects(patch(bytes, (b) => b.writeUInt32LE(12, embd.typeAt)), /tensor "token_embd.weight" of type Q4_K has rows of 8 elements, not a multiple of its block of 256/);
    // F16 halves the tensor: the next one no longer starts where this one ends.
    await rejects(patch(bytes, (b) => b.writeUInt32LE(1, embd.typeAt)), /tensor "blk.0.attn_norm.weight" has offset \d+ where \d+ was expected/);
  });

  test('tensor data: one tensor after the other in the order of their infos, aligned, inside the file', async () => {
    const bytes = smallBytes();
    const tensors = mapHeader(bytes).tensors;
    const embd = tensors.get('token_embd.weight')!;
    const norm = tensors.get('blk.0.attn_norm.weight')!;
    const output = tensors.get('output.weight')!;
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(b.readBigUInt64LE(norm.offsetAt) + 4n, norm.offsetAt)), /tensor "blk.0.attn_norm.weight" has offset \d+, not a multiple of the alignment 32/);
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(2n ** 40n, output.offsetAt)), /tensor "output.weight" has offset 1099511627776 where \d+ was expected \(the tensors' data lies one after the other, in the order of their infos, each padded to the alignment 32\)/);
    await rejects(patch(bytes, (b) => b.writeBigUInt64LE(b.readBigUInt64LE(embd.offsetAt), norm.offsetAt)), /tensor "blk.0.attn_norm.weight" has offset 0 where \d+ was expected/);
    // A gap: the last tensor moved one alignment further, the file grown to hold it.
    await rejects(Buffer.concat([patch(bytes, (b) => b.writeBigUInt64LE(b.readBigUInt64LE(output.offsetAt) + 32n, output.offsetAt)), Buffer.alloc(32)]),
      /tensor "output.weight" has offset \d+ where \d+ was expected/);
    await rejects(bytes.subarray(0, bytes.length - 100), /tensor "output.weight" ends at byte \d+ but the file has \d+ \(truncated\?\)/);
    await rejects(bytes.subarray(0, embd.offsetAt + 3), /it declares 12 tensors but only \d+ bytes remain for their infos/);
    await rejects(bytes.subarray(0, output.offsetAt + 3), /the file ends inside the info of tensor "output.weight" at byte \d+ \(\d+ bytes needed, \d+ remain; truncated\?\)/);
    // Out of order, even disjoint, is refused: llama.cpp reads the data in the order of the infos.
    const q = tensors.get('blk.0.attn_q.weight')!;
    const k = tensors.get('blk.0.attn_k.weight')!;
    await rejects(patch(bytes, (b) => {
      const qOffset = b.readBigUInt64LE(q.offsetAt);
      b.writeBigUInt64LE(b.readBigUInt64LE(k.offsetAt), q.offsetAt);
      b.writeBigUInt64LE(qOffset, k.offsetAt);
    }), /tensor "blk.0.attn_q.weight" has offset \d+ where \d+ was expected/);
  });

  test('a file that gets shorter while it is read is refused, not read past its end', async () => {
    const path = place(smallBytes());
    const handle = await open(path, 'r');
    try {
      const cursor = new FileCursor(handle, (await handle.stat()).size + 1000, 4096);
      cursor.skip((await handle.stat()).size - 10);
      await assert.rejects(cursor.load(100), FileChangedError);
    } finally {
      await handle.close();
    }
  });

  test('a FIFO where a model was is refused at once, not waited on', { skip: process.platform === 'win32' }, async () => {
    const fifo = join(dir, 'fifo.gguf');
    execFileSync('mkfifo', [fifo]);
    await assert.rejects(validateGgufFile(fifo), (error: ServiceError) => error.code === 'invalid_model_file' && /not a regular file/.test(error.message));
  });

  test('a folder or a missing file is invalid_model_file without its path', async () => {
    await assert.rejects(validateGgufFile(dir), (error: ServiceError) => error.code === 'invalid_model_file' && !error.message.includes(dir));
    const missing = join(dir, 'missing.gguf');
    await assert.rejects(validateGgufFile(missing), (error: ServiceError) => error.code === 'invalid_model_file' && /ENOENT/.test(error.message) && !error.message.includes(dir));
  });
});
