/**
 * LMSP 5: a model file is untrusted input. This validates the structure of a GGUF file with our
 * own bounded reads before any engine code reads it: every length, count, type and offset is
 * checked against the bytes the file really has, so no file can make the service allocate more
 * than a fixed window plus a small multiple of its header, or loop longer than its header is long.
 *
 * Rules (ggml's docs/gguf.md, versions 2 and 3), each failure naming what and where:
 * - the magic "GGUF", version 2 or 3, tensor and metadata counts within fixed bounds and within
 *   what the remaining bytes can hold;
 * - every key 1 to 65535 bytes of printable ASCII, unique; every string and array within the file;
 *   every value type one of the 13 known, bools 0 or 1, no array of arrays (llama.cpp reads none);
 * - `general.alignment`, when present, a uint32 power of two; `general.architecture` a short
 *   lowercase name; `<architecture>.context_length`, when present, a uint32 (llama.cpp refuses
 *   any other type) from 1 to 2^31 - 1 (it reads a larger one as negative; 0 leaves no room for
 *   a token); no split models (their other
 *   parts would escape validation and the digest);
 * - tensor infos: names 1 to 63 bytes and unique, 1 to 4 dimensions each > 0 whose product stays
 *   exact, a known ggml type whose block divides the rows; the tensors' data one after the
 *   other in the order of their infos, each padded to the alignment (as llama.cpp requires:
 *   it refuses any other offset), and all of it inside the file.
 *
 * Messages never hold a file-system path: a client without models:write may see them as a
 * task's error.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { openedAt } from './hashing.js';
import { ServiceError } from '../domain/errors.js';
import { FileChangedError, FileCursor } from './gguf-cursor.js';
import { GGUF_TYPE_UINT32, GGUF_VALUE_TYPES } from './gguf-format.js';
import { HeaderReader, invalidModelFile } from './gguf-metadata.js';
import { readTensorInfos } from './gguf-tensors.js';

export { invalidModelFile };

/** The largest trained context llama.cpp reads as it is (a signed 32-bit integer). */
const MAX_CONTEXT_LENGTH = 2 ** 31 - 1;

/** What validation learned about a file: the facts the registry records come from here. */
export interface GgufStructure {
  version: number;
  architecture: string;
  /** `<architecture>.context_length`, when it is an integer. */
  contextLength: number | null;
  /** `general.file_type`, when it is an integer. */
  fileType: number | null;
  alignment: number;
  /** `tokenizer.ggml.model`, when it is a string of at most 64 bytes. */
  tokenizerModel: string | null;
  hasChatTemplate: boolean;
  /** The sum of the elements of every tensor. */
  parameters: number;
  tensorCount: number;
  metadataCount: number;
  /** Where the tensor data section starts: the header's size, padded to the alignment. */
  dataOffset: number;
}

/**
 * Validates the GGUF file at `path` and returns what it learned; anything wrong is a
 * ServiceError `invalid_model_file` whose message names the fault and its byte offset.
 */
export async function validateGgufFile(path: string, options: { registered?: { within: readonly string[] } } = {}): Promise<GgufStructure> {
  let handle;
  try {
    // Non-blocking, so that a FIFO put where a model was cannot hold the open forever; for a
    // regular file the flag changes nothing, and anything else is refused below. A registered
    // model's file is read only where it was registered, never through a link that leads elsewhere.
    handle = await open(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (options.registered ? constants.O_NOFOLLOW : 0));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw invalidModelFile(options.registered && code === 'ELOOP' ? 'it now lies behind a link, which is not followed' : `the file cannot be opened (${code ?? 'error'})`);
  }
  try {
    if (options.registered && !openedAt(handle.fd, path, options.registered.within)) throw invalidModelFile('it now lies behind a link, which is not followed');
    // The size of the open file, not of whatever the path names a moment later.
    const info = await handle.stat();
    if (!info.isFile()) throw invalidModelFile('it is not a regular file');
    const reader = new HeaderReader(new FileCursor(handle, info.size));
    await reader.readFixedHeader();
    await reader.readMetadata();
    const tensors = await readTensorInfos(reader);
    if (reader.tensorCount === 0) throw invalidModelFile('it holds no tensors');
    if (reader.architecture === null) {
      const type = reader.architectureType;
      throw invalidModelFile(type === null ? 'general.architecture is missing' : `general.architecture has type ${GGUF_VALUE_TYPES[type] ?? type}, not string`);
    }
    // llama.cpp keeps the trained context in a signed 32-bit field: a larger value reads as
    // negative, and every generation on the model would be refused.
    const contextLength = reader.contextLength();
    if (contextLength !== null && (contextLength > MAX_CONTEXT_LENGTH || contextLength < 1)) {
      throw invalidModelFile(`${reader.architecture}.context_length is ${Number.isFinite(contextLength) ? contextLength : 'beyond 2^53'} (1 to ${MAX_CONTEXT_LENGTH})`);
    }
    // llama.cpp refuses to load a model whose context length has another type, in range or not.
    const contextLengthType = reader.contextLengthType();
    if (contextLengthType !== null && contextLengthType !== GGUF_TYPE_UINT32) {
      throw invalidModelFile(`${reader.architecture}.context_length must be a uint32, not ${GGUF_VALUE_TYPES[contextLengthType] ?? `type ${contextLengthType}`}`);
    }
    if (reader.splitCount !== null && reader.splitCount > 1) {
      throw invalidModelFile(`it is part of a split model (split.count ${reader.splitCount}); merge the parts into one file first`);
    }
    return {
      version: reader.version,
      architecture: reader.architecture,
      contextLength,
      fileType: reader.fileType,
      alignment: reader.alignment,
      tokenizerModel: reader.tokenizerModel,
      hasChatTemplate: reader.hasChatTemplate,
      parameters: tensors.parameters,
      tensorCount: reader.tensorCount,
      metadataCount: reader.metadataCount,
      dataOffset: tensors.dataOffset,
    };
  } catch (error) {
    if (error instanceof FileChangedError) throw invalidModelFile(error.message);
    if (error instanceof ServiceError) throw error;
    // An I/O error of the file itself (EIO, EISDIR): its code, never its path.
    throw invalidModelFile(`the file cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  } finally {
    await handle.close();
  }
}
