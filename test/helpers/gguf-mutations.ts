/**
 * Mutations of valid GGUF files for property-based tests (fast-check): flipped bytes anywhere or
 * in the header, truncation, inserted bytes, length and count fields overwritten with huge values,
 * type fields overwritten, and random bytes after a valid magic and version.
 */
import fc from 'fast-check';
import type { HeaderMap } from './gguf.js';

export type Mutation =
  | { kind: 'flip'; at: number; xor: number }
  | { kind: 'truncate'; to: number }
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'length'; at: number; value: bigint }
  | { kind: 'type'; at: number; value: number };

/** Values that broke readers before: just past 32 bits, 2^33, 3.5e9, the top of 63 and 64 bits. */
const HUGE = [2n ** 32n, 2n ** 33n, 3_500_000_000n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 53n, 2n ** 31n];

export function mutationArbitrary(length: number, map: HeaderMap): fc.Arbitrary<Mutation> {
  const near = [BigInt(length), BigInt(length) + 1n, BigInt(length - map.headerEnd)];
  return fc.oneof(
    fc.record({ kind: fc.constant('flip' as const), at: fc.nat(length - 1), xor: fc.integer({ min: 1, max: 255 }) }),
    fc.record({ kind: fc.constant('flip' as const), at: fc.nat(map.headerEnd - 1), xor: fc.integer({ min: 1, max: 255 }) }),
    fc.record({ kind: fc.constant('truncate' as const), to: fc.nat(length) }),
    fc.record({ kind: fc.constant('insert' as const), at: fc.nat(length), bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }) }),
    fc.record({
      kind: fc.constant('length' as const),
      at: fc.constantFrom(...map.lengthFields),
      value: fc.oneof(fc.constantFrom(...HUGE, ...near), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })),
    }),
    fc.record({
      kind: fc.constant('type' as const),
      at: fc.constantFrom(...map.typeFields),
      value: fc.oneof(fc.integer({ min: 0, max: 45 }), fc.constantFrom(0xffffffff, 2 ** 31)),
    }),
  );
}

/** Applies mutations in order; one whose position fell outside the (changed) file is skipped. */
export function applyMutations(original: Uint8Array, mutations: readonly Mutation[]): Buffer {
  let bytes = Buffer.from(original);
  for (const mutation of mutations) {
    switch (mutation.kind) {
      case 'flip':
        if (mutation.at < bytes.length) bytes[mutation.at] = bytes[mutation.at]! ^ mutation.xor;
        break;
      case 'truncate':
        bytes = bytes.subarray(0, Math.min(mutation.to, bytes.length));
        break;
      case 'insert':
        if (mutation.at <= bytes.length) bytes = Buffer.concat([bytes.subarray(0, mutation.at), mutation.bytes, bytes.subarray(mutation.at)]);
        break;
      case 'length':
        if (mutation.at + 8 <= bytes.length) bytes.writeBigUInt64LE(mutation.value, mutation.at);
        break;
      case 'type':
        if (mutation.at + 4 <= bytes.length) bytes.writeUInt32LE(mutation.value, mutation.at);
        break;
    }
  }
  return bytes;
}

/** A valid magic and version, small or random counts, then random bytes. */
export function randomAfterMagic(): fc.Arbitrary<Buffer> {
  return fc.record({
    version: fc.constantFrom(2, 3),
    tensors: fc.oneof(fc.nat(4), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })),
    entries: fc.oneof(fc.nat(8), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })),
    tail: fc.uint8Array({ maxLength: 4096 }),
    counts: fc.boolean(),
  }).map(({ version, tensors, entries, tail, counts }) => {
    const head = Buffer.alloc(counts ? 24 : 8);
    head.write('GGUF', 0, 'latin1');
    head.writeUInt32LE(version, 4);
    if (counts) {
      head.writeBigUInt64LE(BigInt(tensors), 8);
      head.writeBigUInt64LE(BigInt(entries), 16);
    }
    return Buffer.concat([head, tail]);
  });
}
