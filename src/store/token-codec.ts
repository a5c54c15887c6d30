/**
 * Token ids as stored with delta events (the resume snapshot, LMSP 7.5): unsigned LEB128
 * varints, one after another. A vocabulary under 16,384 tokens takes at most 2 bytes a token
 * instead of the 4 of a fixed-width integer.
 */

export function packTokens(tokens: readonly number[]): Buffer {
  const bytes: number[] = [];
  for (const token of tokens) {
    if (!Number.isInteger(token) || token < 0 || token > 0xffffffff) throw new RangeError(`not a token id: ${token}`);
    let value = token;
    while (value >= 0x80) {
      bytes.push((value % 0x80) | 0x80);
      value = Math.floor(value / 0x80);
    }
    bytes.push(value);
  }
  return Buffer.from(bytes);
}

/** Appends the token ids of `blob` to `into`. */
export function unpackTokens(blob: Uint8Array, into: number[] = []): number[] {
  let value = 0;
  let scale = 1;
  for (const byte of blob) {
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) {
      into.push(value);
      value = 0;
      scale = 1;
    } else {
      scale *= 0x80;
    }
  }
  if (scale !== 1) throw new RangeError('a token list ends in the middle of a token');
  return into;
}

/** The fixed-width form written before migration 0009: 4 bytes a token, little-endian. */
export function packedFromFixedWidth(blob: Uint8Array): Buffer {
  const view = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
  const tokens: number[] = [];
  for (let offset = 0; offset + 4 <= view.length; offset += 4) tokens.push(view.readUInt32LE(offset));
  return packTokens(tokens);
}
