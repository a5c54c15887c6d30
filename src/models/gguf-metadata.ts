/**
 * The fixed header and the metadata of a GGUF file, read for validation (LMSP 5: a model file is
 * untrusted input): every key, string and array checked against the bytes that remain, values
 * skipped unless a fact needs them, so that a tokenizer of 200,000 strings is walked, not held.
 * The messages name what is wrong and where, never a file-system path.
 */
import { ServiceError } from '../domain/errors.js';
import { quoteShort } from '../text.js';
import type { FileCursor } from './gguf-cursor.js';
import {
  GGUF_DEFAULT_ALIGNMENT, GGUF_FIXED_HEADER_BYTES, GGUF_INTEGER_TYPES, GGUF_MAGIC, GGUF_TYPE_ARRAY, GGUF_TYPE_BOOL,
  GGUF_TYPE_STRING, GGUF_TYPE_UINT32, GGUF_VALUE_BYTES, GGUF_VALUE_TYPES, MAX_ARRAY_ITEMS, MAX_KEY_BYTES,
  MAX_METADATA_ENTRIES, MAX_STRING_BYTES, MAX_TENSORS, MIN_TENSOR_INFO_BYTES,
} from './gguf-format.js';

/** A count from the file for a message: exact up to 2^53. */
export function count(value: number): string {
  return Number.isSafeInteger(value) ? String(value) : 'more than 2^53';
}

export function invalidModelFile(why: string): ServiceError {
  return new ServiceError('invalid_model_file', `The file is not a usable GGUF model: ${why}`, { param: 'path' });
}


/** Architecture names as llama.cpp spells them (`llama`, `gpt-oss`, `seed_oss`). */
const ARCHITECTURE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;
/** Strings the facts keep are short; longer ones are checked and skipped, never held. */
const MAX_FACT_BYTES = 64;

export class HeaderReader {
  version = 0;
  tensorCount = 0;
  metadataCount = 0;
  alignment = GGUF_DEFAULT_ALIGNMENT;
  architecture: string | null = null;
  architectureType: number | null = null;
  fileType: number | null = null;
  tokenizerModel: string | null = null;
  hasChatTemplate = false;
  splitCount: number | null = null;
  private readonly contextLengths = new Map<string, number>();
  /** The value type of each `*.context_length` key, whatever it is (llama.cpp reads only a uint32). */
  private readonly contextLengthTypes = new Map<string, number>();
  private readonly keys = new Set<string>();

  constructor(readonly cursor: FileCursor) {}

  /**
   * Makes `bytes` bytes at the position readable, or fails naming what the file ends inside.
   * Returns nothing when they are already in the window, so that hot loops need not await.
   */
  need(bytes: number, what: () => string): Promise<void> | undefined {
    const { cursor } = this;
    if (bytes > cursor.remaining) {
      throw invalidModelFile(`the file ends inside ${what()} at byte ${cursor.position} (${bytes} bytes needed, ${cursor.remaining} remain; truncated?)`);
    }
    return bytes > cursor.buffered ? cursor.load(bytes) : undefined;
  }

  /** Reads a length field and checks that the bytes it declares follow it in the file. */
  async length(what: () => string, limit: number): Promise<number> {
    const at = this.cursor.position;
    await this.need(8, what);
    const bytes = this.cursor.u64();
    if (bytes > this.cursor.remaining) {
      throw invalidModelFile(`${what()} at byte ${at} declares ${count(bytes)} bytes but only ${this.cursor.remaining} remain`);
    }
    if (bytes > limit) throw invalidModelFile(`${what()} at byte ${at} declares ${count(bytes)} bytes (at most ${limit})`);
    return bytes;
  }

  contextLength(): number | null {
    return this.architecture === null ? null : this.contextLengths.get(`${this.architecture}.context_length`) ?? null;
  }

  /** The value type of the architecture's context length, when the key is there. */
  contextLengthType(): number | null {
    return this.architecture === null ? null : this.contextLengthTypes.get(`${this.architecture}.context_length`) ?? null;
  }

  async readFixedHeader(): Promise<void> {
    const { cursor } = this;
    if (cursor.size === 0) throw invalidModelFile('the file is empty');
    if (cursor.size < GGUF_FIXED_HEADER_BYTES) throw invalidModelFile(`the file is too short to be GGUF (${cursor.size} bytes)`);
    await this.need(GGUF_FIXED_HEADER_BYTES, () => 'the GGUF header');
    if (cursor.text(4, 'latin1') !== GGUF_MAGIC) throw invalidModelFile('it does not start with the GGUF magic');
    this.version = cursor.u32();
    if (this.version !== 2 && this.version !== 3) {
      // A big-endian file reads its version 3 as 0x03000000 here.
      const hint = (this.version & 0xffff) === 0 && this.version !== 0 ? '; a big-endian file?' : '';
      throw invalidModelFile(`GGUF version ${this.version} is not supported (2 or 3${hint})`);
    }
    this.tensorCount = cursor.u64();
    this.metadataCount = cursor.u64();
    if (this.tensorCount > MAX_TENSORS) throw invalidModelFile(`its tensor count ${count(this.tensorCount)} is not plausible (at most ${MAX_TENSORS})`);
    if (this.metadataCount > MAX_METADATA_ENTRIES) {
      throw invalidModelFile(`its metadata count ${count(this.metadataCount)} is not plausible (at most ${MAX_METADATA_ENTRIES})`);
    }
  }

  async readMetadata(): Promise<void> {
    for (let index = 0; index < this.metadataCount; index++) await this.readEntry(index);
    if (this.tensorCount * MIN_TENSOR_INFO_BYTES > this.cursor.remaining) {
      throw invalidModelFile(`it declares ${this.tensorCount} tensors but only ${this.cursor.remaining} bytes remain for their infos`);
    }
  }

  private async readEntry(index: number): Promise<void> {
    const { cursor } = this;
    const at = cursor.position;
    const bytes = await this.length(() => `metadata key #${index}`, MAX_KEY_BYTES);
    if (bytes === 0) throw invalidModelFile(`metadata key #${index} at byte ${at} is empty`);
    await this.need(bytes, () => `metadata key #${index}`);
    const key = cursor.text(bytes, 'latin1');
    if (!PRINTABLE_ASCII.test(key)) throw invalidModelFile(`metadata key #${index} at byte ${at} is not printable ASCII`);
    if (this.keys.has(key)) throw invalidModelFile(`the metadata key ${quoteShort(key)} at byte ${at} appears twice`);
    this.keys.add(key);
    await this.need(4, () => `the type of ${quoteShort(key)}`);
    const type = cursor.u32();
    await this.readValue(key, type);
  }

  private async readValue(key: string, type: number): Promise<void> {
    const { cursor } = this;
    const at = cursor.position;
    if (key === 'general.alignment' && type !== GGUF_TYPE_UINT32) {
      throw invalidModelFile(`general.alignment must be a uint32, not ${GGUF_VALUE_TYPES[type] ?? `type ${type}`}`);
    }
    if (key === 'general.architecture') this.architectureType = type;
    if (key.endsWith('.context_length')) this.contextLengthTypes.set(key, type);
    const size = GGUF_VALUE_BYTES[type];
    if (size !== undefined) {
      await this.need(size, () => `the value of ${quoteShort(key)}`);
      if (type === GGUF_TYPE_BOOL) return this.checkBools(key, 1);
      if (GGUF_INTEGER_TYPES.has(type)) return this.readInteger(key, type, size, at);
      cursor.skip(size);
      return;
    }
    if (type === GGUF_TYPE_STRING) return this.readString(key);
    if (type === GGUF_TYPE_ARRAY) return this.readArray(key);
    throw invalidModelFile(`the value of ${quoteShort(key)} at byte ${at} has unknown type ${type} (0 to 12)`);
  }

  private readInteger(key: string, type: number, size: number, at: number): void {
    const value = this.cursor.integer(size, type % 2 === 1);
    if (key === 'general.alignment') {
      if (value === null || value === 0 || !Number.isInteger(Math.log2(value))) throw invalidModelFile(`general.alignment at byte ${at} is ${value}, not a power of two`);
      this.alignment = value;
    } else if (key === 'general.file_type') {
      this.fileType = value;
    } else if (key === 'split.count') {
      this.splitCount = value;
    } else if (key.endsWith('.context_length')) {
      // Any integer, so that one out of range is refused (beyond 2^53 either way: kept as infinite).
      this.contextLengths.set(key, value ?? Number.POSITIVE_INFINITY);
    }
  }

  private async readString(key: string): Promise<void> {
    const { cursor } = this;
    const bytes = await this.length(() => `the string value of ${quoteShort(key)}`, MAX_STRING_BYTES);
    const kept = key === 'general.architecture' || key === 'tokenizer.ggml.model';
    if (key === 'tokenizer.chat_template') this.hasChatTemplate = true;
    if (!kept || bytes > MAX_FACT_BYTES) {
      if (key === 'general.architecture') {
        throw invalidModelFile(`general.architecture is ${bytes} bytes long (at most ${MAX_FACT_BYTES})`);
      }
      cursor.skip(bytes);
      return;
    }
    await this.need(bytes, () => `the string value of ${quoteShort(key)}`);
    const text = cursor.text(bytes, 'utf8');
    if (key === 'tokenizer.ggml.model') {
      this.tokenizerModel = text;
    } else {
      if (!ARCHITECTURE_PATTERN.test(text)) throw invalidModelFile(`general.architecture ${quoteShort(text)} is not an architecture name (a-z, 0-9, "_", "-")`);
      this.architecture = text;
    }
  }

  private async readArray(key: string): Promise<void> {
    const { cursor } = this;
    const at = cursor.position;
    await this.need(12, () => `the array ${quoteShort(key)}`);
    const itemType = cursor.u32();
    // llama.cpp's reader refuses an array of arrays, empty or not (it reads arrays of numbers,
    // bools and strings only): a file holding one would register, then fail every load.
    if (itemType === GGUF_TYPE_ARRAY) {
      throw invalidModelFile(`the value of ${quoteShort(key)} at byte ${at} is an array of arrays, which llama.cpp cannot read`);
    }
    const items = cursor.u64();
    const itemName = GGUF_VALUE_TYPES[itemType];
    if (itemName === undefined) throw invalidModelFile(`the array ${quoteShort(key)} at byte ${at} has items of unknown type ${itemType} (0 to 12)`);
    const itemBytes = GGUF_VALUE_BYTES[itemType];
    // The least the items can take: their fixed size, or an empty string's or array's header.
    const least = items * (itemBytes ?? (itemType === GGUF_TYPE_STRING ? 8 : 12));
    if (least > cursor.remaining) {
      throw invalidModelFile(`the array ${quoteShort(key)} at byte ${at} declares ${count(items)} items of ${itemName}, at least ${count(least)} bytes, but only ${cursor.remaining} remain`);
    }
    if (items > MAX_ARRAY_ITEMS) throw invalidModelFile(`the array ${quoteShort(key)} at byte ${at} declares ${count(items)} items (at most ${MAX_ARRAY_ITEMS})`);
    if (itemType === GGUF_TYPE_BOOL) return this.checkBools(key, items);
    if (itemBytes !== undefined) {
      cursor.skip(least);
      return;
    }
    if (itemType === GGUF_TYPE_STRING) await this.skipStrings(key, items);
  }

  /** Checks `items` bools (already known to lie within the file) window by window. */
  private async checkBools(key: string, items: number): Promise<void> {
    const { cursor } = this;
    let left = items;
    while (left > 0) {
      const pending = this.need(1, () => `the value of ${quoteShort(key)}`);
      if (pending) await pending;
      const chunk = cursor.peek(Math.min(left, cursor.buffered));
      const bad = chunk.findIndex((byte) => byte > 1);
      if (bad >= 0) throw invalidModelFile(`the bool in ${quoteShort(key)} at byte ${cursor.position + bad} is ${chunk[bad]}, not 0 or 1`);
      cursor.skip(chunk.length);
      left -= chunk.length;
    }
  }

  /** Walks an array of strings by their lengths, without reading their text. */
  private async skipStrings(key: string, items: number): Promise<void> {
    const { cursor } = this;
    for (let index = 0; index < items; index++) {
      const at = cursor.position;
      const pending = this.need(8, () => `item ${index} of ${quoteShort(key)}`);
      if (pending) await pending;
      const bytes = cursor.u64();
      if (bytes > cursor.remaining) {
        throw invalidModelFile(`item ${index} of ${quoteShort(key)} at byte ${at} declares ${count(bytes)} bytes but only ${cursor.remaining} remain`);
      }
      if (bytes > MAX_STRING_BYTES) throw invalidModelFile(`item ${index} of ${quoteShort(key)} at byte ${at} declares ${count(bytes)} bytes (at most ${MAX_STRING_BYTES})`);
      cursor.skip(bytes);
    }
  }
}
