/**
 * GGUF files for the validator's tests: valid ones written by the project's own writer, a map of
 * where each field of their header lies (read by a walker of its own, independent of the
 * validator, for files the writer made), and the two crafted files that once broke the service.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeGgufFile, type GgufFile } from '../../src/engine/gguf-writer.js';
import { buildSyntheticModel, LMSP_TINY, type SyntheticModelOptions } from '../../src/engine/synthetic-model.js';
import { makeDataDir } from './data-dir.js';

/** A synthetic model far smaller than lmsp-tiny (about 20 KB), for many quick cases. */
export const SMALL_MODEL: SyntheticModelOptions = {
  name: 'lmsp-small', embedding: 8, layers: 1, feedForward: 16, heads: 2, contextLength: 256, tensorType: 'f32', seed: 7,
};

/** The bytes the project's writer produces for a file. */
export function ggufBytes(file: GgufFile): Buffer {
  const dir = makeDataDir('gguf');
  try {
    const path = join(dir, 'model.gguf');
    writeGgufFile(path, file);
    return readFileSync(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const tinyBytes = (): Buffer => ggufBytes(buildSyntheticModel(LMSP_TINY));
export const smallBytes = (): Buffer => ggufBytes(buildSyntheticModel(SMALL_MODEL));

/** Where one metadata entry lies: its key's length field, its type, and its value. */
export interface KeyField { at: number; typeAt: number; valueAt: number }
/** Where one tensor info lies: its name's length field, n_dims, the dims, the type and the offset. */
export interface TensorField { at: number; dimsAt: number; dimAt: number[]; typeAt: number; offsetAt: number }

export interface HeaderMap {
  keys: Map<string, KeyField>;
  tensors: Map<string, TensorField>;
  /** Every u64 length or count field: the two counts, key and string lengths, array counts, dims. */
  lengthFields: number[];
  /** Every u32 type field: value types, array item types, ggml types. */
  typeFields: number[];
  headerEnd: number;
}

const FIXED_SIZES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

/** Maps the header of a file the project's writer made (arrays of scalars only). */
export function mapHeader(bytes: Buffer): HeaderMap {
  const map: HeaderMap = { keys: new Map(), tensors: new Map(), lengthFields: [8, 16], typeFields: [], headerEnd: 0 };
  let at = 24;
  const u64 = () => { const value = Number(bytes.readBigUInt64LE(at)); at += 8; return value; };
  const u32 = () => { const value = bytes.readUInt32LE(at); at += 4; return value; };
  const string = () => { map.lengthFields.push(at); const length = u64(); const text = bytes.toString('utf8', at, at + length); at += length; return text; };
  const value = (type: number) => {
    if (type === 8) string();
    else at += FIXED_SIZES[type]!;
  };
  const metadataCount = Number(bytes.readBigUInt64LE(16));
  for (let index = 0; index < metadataCount; index++) {
    const keyAt = at;
    const key = string();
    const typeAt = at;
    map.typeFields.push(at);
    const type = u32();
    const valueAt = at;
    if (type === 9) {
      map.typeFields.push(at);
      const itemType = u32();
      map.lengthFields.push(at);
      const items = u64();
      for (let item = 0; item < items; item++) value(itemType);
    } else {
      value(type);
    }
    map.keys.set(key, { at: keyAt, typeAt, valueAt });
  }
  const tensorCount = Number(bytes.readBigUInt64LE(8));
  for (let index = 0; index < tensorCount; index++) {
    const tensorAt = at;
    const name = string();
    const dimsAt = at;
    const dims = u32();
    const dimAt: number[] = [];
    for (let dim = 0; dim < dims; dim++) {
      dimAt.push(at);
      map.lengthFields.push(at);
      u64();
    }
    const typeAt = at;
    map.typeFields.push(at);
    u32();
    const offsetAt = at;
    u64();
    map.tensors.set(name, { at: tensorAt, dimsAt, dimAt, typeAt, offsetAt });
  }
  map.headerEnd = at;
  return map;
}

/**
 * The 35-byte file that crashed the service inside node-llama-cpp's reader: one metadata entry
 * whose key declares 3,500,000,000 bytes, followed by 3 bytes.
 */
export function craftedHugeString(): Buffer {
  const bytes = Buffer.alloc(35);
  bytes.write('GGUF', 0, 'latin1');
  bytes.writeUInt32LE(3, 4);
  bytes.writeBigUInt64LE(0n, 8);
  bytes.writeBigUInt64LE(1n, 16);
  bytes.writeBigUInt64LE(3_500_000_000n, 24);
  return bytes;
}

/**
 * The 53-byte file that grew the service to 1.2 GB: one metadata entry, a uint8 array declaring
 * 2^33 items, and nothing after it.
 */
export function craftedHugeArray(): Buffer {
  const bytes = Buffer.alloc(53);
  bytes.write('GGUF', 0, 'latin1');
  bytes.writeUInt32LE(3, 4);
  bytes.writeBigUInt64LE(0n, 8);
  bytes.writeBigUInt64LE(1n, 16);
  bytes.writeBigUInt64LE(5n, 24);
  bytes.write('x.arr', 32, 'latin1');
  bytes.writeUInt32LE(9, 37); // array
  bytes.writeUInt32LE(0, 41); // of uint8
  bytes.writeBigUInt64LE(2n ** 33n, 45);
  return bytes;
}

/** Writes bytes to a file in `dir` and returns its path. */
export function writeModel(dir: string, name: string, bytes: Uint8Array): string {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}
