/**
 * What a GGUF file says about itself (LMSP section 5), read with node-llama-cpp's GGUF reader in
 * pure JavaScript (no native code runs in the service process), plus the checks that turn a
 * file that is not a usable model into `invalid_model_file` before anything is registered.
 */
import { open, stat } from 'node:fs/promises';
import type { readGgufFileInfo as ReadGgufFileInfo } from 'node-llama-cpp';
import { ServiceError } from '../domain/errors.js';
import type { GgufFacts } from '../domain/models.js';

/** Bytes per block and elements per block of the ggml tensor types (ggml.c's type traits). */
const GGML_TYPE_BLOCKS: Record<number, readonly [elements: number, bytes: number]> = {
  0: [1, 4], 1: [1, 2], 2: [32, 18], 3: [32, 20], 6: [32, 22], 7: [32, 24], 8: [32, 34], 9: [32, 36],
  10: [256, 84], 11: [256, 110], 12: [256, 144], 13: [256, 176], 14: [256, 210], 15: [256, 292],
  16: [256, 66], 17: [256, 74], 18: [256, 98], 19: [256, 50], 20: [32, 18], 21: [256, 110], 22: [256, 82],
  23: [256, 136], 24: [1, 1], 25: [1, 2], 26: [1, 4], 27: [1, 8], 28: [1, 8], 29: [256, 56], 30: [1, 2],
  34: [256, 54], 35: [256, 66], 39: [32, 17],
};

function invalid(path: string, why: string): ServiceError {
  return new ServiceError('invalid_model_file', `${path} is not a usable GGUF model: ${why}`, { param: 'path' });
}

/** node-llama-cpp is large: the service loads it only when it reads a model file. */
const llamaModule = () => import('node-llama-cpp');

function quantizationName(fileType: unknown, names: Record<number, string>): string | null {
  if (typeof fileType !== 'number') return null;
  const name = names[fileType];
  return name ? name.replace(/^(MOSTLY|ALL)_/, '') : `type_${fileType}`;
}

/** Bounds on header counts: far above any real model, far below what would make parsing hang. */
const MAX_TENSORS = 1_000_000;
const MAX_METADATA_ENTRIES = 100_000;

/**
 * Checks the fixed part of the header before the full parser sees the file: a file that starts
 * with "GGUF" but holds garbage after it can otherwise send a parser into a near-endless loop.
 */
async function checkFixedHeader(path: string, size: number): Promise<void> {
  if (size < 24) throw invalid(path, 'the file is too short to be GGUF');
  const handle = await open(path, 'r');
  const header = Buffer.alloc(24);
  try {
    await handle.read(header, 0, 24, 0);
  } finally {
    await handle.close();
  }
  if (header.toString('latin1', 0, 4) !== 'GGUF') throw invalid(path, 'it does not start with the GGUF magic');
  const version = header.readUInt32LE(4);
  if (version !== 2 && version !== 3) throw invalid(path, `GGUF version ${version} is not supported (2 or 3)`);
  if (header.readBigUInt64LE(8) > BigInt(MAX_TENSORS)) throw invalid(path, 'its tensor count is not plausible');
  if (header.readBigUInt64LE(16) > BigInt(MAX_METADATA_ENTRIES)) throw invalid(path, 'its metadata count is not plausible');
}

/** Reads and checks a GGUF file; throws `invalid_model_file` for anything unusable. */
export async function readGgufFacts(path: string): Promise<GgufFacts> {
  const { size } = await stat(path);
  if (size === 0) throw invalid(path, 'the file is empty');
  await checkFixedHeader(path, size);
  const { readGgufFileInfo, GgufFileType } = await llamaModule();
  let info: Awaited<ReturnType<typeof ReadGgufFileInfo>>;
  try {
    info = await readGgufFileInfo(path, { readTensorInfo: true, logWarnings: false });
  } catch (error) {
    throw invalid(path, (error as Error).message);
  }
  const tensors = info.fullTensorInfo ?? [];
  const headerEnd = info.infoEndOffset ?? 0;
  // A truncated header reads as zeros: nameless tensors, empty keys, offsets past the end.
  if (headerEnd > size) throw invalid(path, 'the file ends inside its header (truncated?)');
  if (tensors.length === 0) throw invalid(path, 'it holds no tensors');
  if (tensors.some((tensor) => !tensor.name || tensor.dimensions.length === 0)) throw invalid(path, 'its tensor table is damaged');
  const metadata = info.metadata as unknown as Record<string, Record<string, unknown> | undefined>;
  const general = metadata.general ?? {};
  const architecture = typeof general.architecture === 'string' ? general.architecture : null;
  if (!architecture) throw invalid(path, 'general.architecture is missing');
  const alignment = typeof general.alignment === 'number' ? general.alignment : 32;
  const dataStart = Math.ceil(headerEnd / alignment) * alignment;
  let end = dataStart;
  let parameters = 0;
  for (const tensor of tensors) {
    const elements = tensor.dimensions.reduce<number>((product, dim) => product * Number(dim), 1);
    parameters += elements;
    const block = GGML_TYPE_BLOCKS[tensor.ggmlType];
    const bytes = block ? Math.ceil(elements / block[0]) * block[1] : 0;
    end = Math.max(end, dataStart + Number(tensor.offset) + bytes);
  }
  if (end > size) throw invalid(path, `its tensors need ${end} bytes but the file has ${size} (truncated?)`);
  const architectureMetadata = metadata[architecture] ?? {};
  const contextLength = typeof architectureMetadata.context_length === 'number' ? architectureMetadata.context_length : null;
  const tokenizer = (metadata.tokenizer?.ggml as Record<string, unknown> | undefined)?.model;
  return {
    architecture,
    contextLength,
    parameters,
    quantization: quantizationName(general.file_type, GgufFileType as unknown as Record<number, string>),
    tokenizer: typeof tokenizer === 'string' ? tokenizer : null,
  };
}
