/**
 * A small writer of GGUF version 3 files: header, metadata, tensor infos and 32-byte aligned
 * tensor data. It exists so that the built-in model (and benchmark models) can be produced by
 * this project's own code, byte for byte the same on every machine.
 *
 * Layout (all little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count,
 * metadata entries, tensor infos, padding to the alignment, then each tensor's data at its
 * aligned offset.
 */
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { endianness } from 'node:os';

/** Typed arrays use the host's byte order; GGUF is little-endian. */
const LITTLE_ENDIAN = endianness() === 'LE';

export type GgufScalarType =
  | 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'bool' | 'string' | 'u64' | 'i64' | 'f64';

export type GgufValue =
  | { type: Exclude<GgufScalarType, 'string' | 'bool' | 'u64' | 'i64'>; value: number }
  | { type: 'u64' | 'i64'; value: bigint | number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; itemType: GgufScalarType; values: readonly (number | string | boolean | bigint)[] };

export type GgufTensorType = 'f32' | 'f16';

export interface GgufTensor {
  name: string;
  /** ggml dimensions, innermost (contiguous) first. */
  dims: readonly number[];
  type: GgufTensorType;
  /** Produces the tensor's values in storage order; called once, while writing. */
  values: () => Float32Array;
}

export interface GgufFile {
  metadata: ReadonlyArray<readonly [string, GgufValue]>;
  tensors: readonly GgufTensor[];
}

const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const GGUF_VERSION = 3;
export const GGUF_ALIGNMENT = 32;

const VALUE_TYPE_IDS: Record<GgufScalarType | 'array', number> = {
  u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12,
};

const TENSOR_TYPE_IDS: Record<GgufTensorType, number> = { f32: 0, f16: 1 };
const TENSOR_TYPE_BYTES: Record<GgufTensorType, number> = { f32: 4, f16: 2 };

/** Growable little-endian byte sink for the header. */
class ByteSink {
  private buffer = Buffer.alloc(1 << 16);
  length = 0;

  private reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    let size = this.buffer.length * 2;
    while (size < this.length + bytes) size *= 2;
    const next = Buffer.alloc(size);
    this.buffer.copy(next, 0, 0, this.length);
    this.buffer = next;
  }

  u8(value: number): void { this.reserve(1); this.buffer.writeUInt8(value, this.length); this.length += 1; }
  i8(value: number): void { this.reserve(1); this.buffer.writeInt8(value, this.length); this.length += 1; }
  u16(value: number): void { this.reserve(2); this.buffer.writeUInt16LE(value, this.length); this.length += 2; }
  i16(value: number): void { this.reserve(2); this.buffer.writeInt16LE(value, this.length); this.length += 2; }
  u32(value: number): void { this.reserve(4); this.buffer.writeUInt32LE(value, this.length); this.length += 4; }
  i32(value: number): void { this.reserve(4); this.buffer.writeInt32LE(value, this.length); this.length += 4; }
  f32(value: number): void { this.reserve(4); this.buffer.writeFloatLE(value, this.length); this.length += 4; }
  f64(value: number): void { this.reserve(8); this.buffer.writeDoubleLE(value, this.length); this.length += 8; }
  u64(value: bigint | number): void { this.reserve(8); this.buffer.writeBigUInt64LE(BigInt(value), this.length); this.length += 8; }
  i64(value: bigint | number): void { this.reserve(8); this.buffer.writeBigInt64LE(BigInt(value), this.length); this.length += 8; }
  string(value: string): void {
    const bytes = Buffer.from(value, 'utf8');
    this.u64(bytes.length);
    this.reserve(bytes.length);
    bytes.copy(this.buffer, this.length);
    this.length += bytes.length;
  }
  pad(alignment: number): void {
    const padding = (alignment - (this.length % alignment)) % alignment;
    this.reserve(padding);
    this.buffer.fill(0, this.length, this.length + padding);
    this.length += padding;
  }
  bytes(): Buffer { return this.buffer.subarray(0, this.length); }
}

function writeScalar(sink: ByteSink, type: GgufScalarType, value: number | string | boolean | bigint): void {
  switch (type) {
    case 'u8': sink.u8(Number(value)); break;
    case 'i8': sink.i8(Number(value)); break;
    case 'u16': sink.u16(Number(value)); break;
    case 'i16': sink.i16(Number(value)); break;
    case 'u32': sink.u32(Number(value)); break;
    case 'i32': sink.i32(Number(value)); break;
    case 'f32': sink.f32(Number(value)); break;
    case 'f64': sink.f64(Number(value)); break;
    case 'u64': sink.u64(value as bigint | number); break;
    case 'i64': sink.i64(value as bigint | number); break;
    case 'bool': sink.u8(value ? 1 : 0); break;
    case 'string': sink.string(String(value)); break;
  }
}

function tensorByteLength(tensor: GgufTensor): number {
  return tensor.dims.reduce((product, dim) => product * dim, 1) * TENSOR_TYPE_BYTES[tensor.type];
}

function alignUp(value: number, alignment: number): number {
  return Math.ceil(value / alignment) * alignment;
}

/** Serialises the header (everything before the tensor data), padded to the alignment. */
export function encodeGgufHeader(file: GgufFile): Buffer {
  const sink = new ByteSink();
  sink.u32(GGUF_MAGIC);
  sink.u32(GGUF_VERSION);
  sink.u64(file.tensors.length);
  sink.u64(file.metadata.length);
  for (const [key, entry] of file.metadata) {
    sink.string(key);
    if (entry.type === 'array') {
      sink.u32(VALUE_TYPE_IDS.array);
      sink.u32(VALUE_TYPE_IDS[entry.itemType]);
      sink.u64(entry.values.length);
      for (const item of entry.values) writeScalar(sink, entry.itemType, item);
    } else {
      sink.u32(VALUE_TYPE_IDS[entry.type]);
      writeScalar(sink, entry.type, entry.value);
    }
  }
  let offset = 0;
  for (const tensor of file.tensors) {
    sink.string(tensor.name);
    sink.u32(tensor.dims.length);
    for (const dim of tensor.dims) sink.u64(dim);
    sink.u32(TENSOR_TYPE_IDS[tensor.type]);
    sink.u64(offset);
    offset = alignUp(offset + tensorByteLength(tensor), GGUF_ALIGNMENT);
  }
  sink.pad(GGUF_ALIGNMENT);
  return sink.bytes();
}

/** IEEE 754 binary16 from a float, rounding to nearest even; exact and platform independent. */
const halfScratch = new Float32Array(1);
const halfScratchBits = new Uint32Array(halfScratch.buffer);

export function toHalf(value: number): number {
  halfScratch[0] = value;
  const bits = halfScratchBits[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  let mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    if (halfExponent < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - halfExponent;
    let half = mantissa >>> shift;
    const remainder = mantissa & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (remainder > halfway || (remainder === halfway && (half & 1))) half += 1;
    return sign | half;
  }
  let half = (halfExponent << 10) | (mantissa >>> 13);
  const remainder = mantissa & 0x1fff;
  if (remainder > 0x1000 || (remainder === 0x1000 && (half & 1))) half += 1;
  return sign | half;
}

function encodeTensorData(tensor: GgufTensor): Buffer {
  const values = tensor.values();
  const expected = tensor.dims.reduce((product, dim) => product * dim, 1);
  if (values.length !== expected) {
    throw new Error(`tensor ${tensor.name}: ${values.length} values for dims ${tensor.dims.join('x')}`);
  }
  if (!LITTLE_ENDIAN) {
    const bytes = TENSOR_TYPE_BYTES[tensor.type];
    const out = Buffer.alloc(values.length * bytes);
    for (let i = 0; i < values.length; i++) {
      if (tensor.type === 'f32') out.writeFloatLE(values[i]!, i * 4);
      else out.writeUInt16LE(toHalf(values[i]!), i * 2);
    }
    return out;
  }
  if (tensor.type === 'f32') {
    const out = new Float32Array(values.length);
    out.set(values);
    return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
  }
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = toHalf(values[i]!);
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

/**
 * Writes the file atomically: to a temporary name in the same folder, flushed to disk, then
 * renamed, so a crash never leaves a half-written model where a complete one is expected.
 */
export function writeGgufFile(path: string, file: GgufFile): void {
  const temporary = `${path}.${process.pid}.tmp`;
  const fd = openSync(temporary, 'w', 0o644);
  try {
    const header = encodeGgufHeader(file);
    writeSync(fd, header);
    let written = 0;
    for (const tensor of file.tensors) {
      const data = encodeTensorData(tensor);
      writeSync(fd, data);
      written += data.length;
      const padding = alignUp(written, GGUF_ALIGNMENT) - written;
      if (padding > 0) writeSync(fd, Buffer.alloc(padding));
      written += padding;
    }
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    rmSync(temporary, { force: true });
    throw error;
  }
  closeSync(fd);
  renameSync(temporary, path);
}
