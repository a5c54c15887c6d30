/**
 * A forward cursor over a file that reads it through one fixed window with positioned reads, so
 * that reading a header costs the same memory whatever the header declares (LMSP 5: a model file
 * is untrusted input). Skipping moves the position without reading; values are read only from
 * the window. The caller checks every length against `remaining` before it asks for bytes.
 */
import type { FileHandle } from 'node:fs/promises';

/** Large enough for the longest field read whole: a 65535-byte key and its length. */
export const CURSOR_WINDOW_BYTES = 128 * 1024;

export class FileChangedError extends Error {}

export class FileCursor {
  private readonly window: Buffer;
  private windowStart = 0;
  private windowEnd = 0;
  /** The file offset of the next byte to read. */
  position = 0;

  constructor(private readonly handle: FileHandle, readonly size: number, windowBytes = CURSOR_WINDOW_BYTES) {
    this.window = Buffer.alloc(windowBytes);
  }

  get remaining(): number {
    return this.size - this.position;
  }

  /** Bytes at the position already in the window: values this short are read without I/O. */
  get buffered(): number {
    return this.position >= this.windowStart ? Math.max(0, this.windowEnd - this.position) : 0;
  }

  /**
   * Brings `bytes` bytes at the position into the window (at most the window's size; the caller
   * has checked that they lie within the file). A file that got shorter since it was measured is
   * a FileChangedError.
   */
  async load(bytes: number): Promise<void> {
    if (bytes <= this.buffered) return;
    const length = Math.min(this.window.length, this.size - this.position);
    let filled = 0;
    while (filled < length) {
      const { bytesRead } = await this.handle.read(this.window, filled, length - filled, this.position + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    this.windowStart = this.position;
    this.windowEnd = this.position + filled;
    if (filled < bytes) throw new FileChangedError('the file got shorter while it was read');
  }

  skip(bytes: number): void {
    this.position += bytes;
  }

  // The readers below take bytes already loaded (see `load` and `buffered`).

  u8(): number {
    const value = this.window[this.position - this.windowStart]!;
    this.position += 1;
    return value;
  }

  u32(): number {
    const value = this.window.readUInt32LE(this.position - this.windowStart);
    this.position += 4;
    return value;
  }

  /** A u64 as a number: exact up to 2^53, and above that still larger than any bound checked. */
  u64(): number {
    const at = this.position - this.windowStart;
    const value = this.window.readUInt32LE(at + 4) * 2 ** 32 + this.window.readUInt32LE(at);
    this.position += 8;
    return value;
  }

  /** A signed integer of 1, 2, 4 or 8 bytes, or an unsigned one; null beyond 2^53. */
  integer(bytes: number, signed: boolean): number | null {
    const at = this.position - this.windowStart;
    this.position += bytes;
    if (bytes === 8) {
      const value = signed ? this.window.readBigInt64LE(at) : this.window.readBigUInt64LE(at);
      return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(value) : null;
    }
    return signed ? this.window.readIntLE(at, bytes) : this.window.readUIntLE(at, bytes);
  }

  /** `bytes` bytes as text (latin1 keeps every byte, so a check of the bytes sees them all). */
  text(bytes: number, encoding: 'latin1' | 'utf8'): string {
    const at = this.position - this.windowStart;
    this.position += bytes;
    return this.window.toString(encoding, at, at + bytes);
  }

  /** The loaded bytes at the position, without moving: for checking many small values at once. */
  peek(bytes: number): Buffer {
    const at = this.position - this.windowStart;
    return this.window.subarray(at, at + bytes);
  }
}
