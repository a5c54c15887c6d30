/**
 * The facts of the GGUF format the validator checks against (ggml's docs/gguf.md, versions 2
 * and 3, which share one layout), and the bounds the service sets on top of them (LMSP 5: a model
 * file is untrusted input).
 */

/** The 13 metadata value types of GGUF, by id. */
export const GGUF_VALUE_TYPES = [
  'uint8', 'int8', 'uint16', 'int16', 'uint32', 'int32', 'float32', 'bool', 'string', 'array', 'uint64', 'int64', 'float64',
] as const;
export type GgufValueTypeName = (typeof GGUF_VALUE_TYPES)[number];

export const GGUF_TYPE_STRING = 8;
export const GGUF_TYPE_ARRAY = 9;
export const GGUF_TYPE_BOOL = 7;
export const GGUF_TYPE_UINT32 = 4;

/** Bytes of each fixed-size value type; strings and arrays have none. */
export const GGUF_VALUE_BYTES: Readonly<Record<number, number>> = {
  0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8,
};

/** Integer value types, whose values the facts may use (context length, file type, split count). */
export const GGUF_INTEGER_TYPES: ReadonlySet<number> = new Set([0, 1, 2, 3, 4, 5, 10, 11]);

/**
 * The ggml tensor types a GGUF file may hold: name, elements per block, bytes per block (ggml.c's
 * type traits). Ids 4, 5 and 31-33, 36-38 were removed from the format and are not accepted.
 */
export const GGML_TYPES: Readonly<Record<number, readonly [name: string, blockElements: number, blockBytes: number]>> = {
  0: ['F32', 1, 4], 1: ['F16', 1, 2], 2: ['Q4_0', 32, 18], 3: ['Q4_1', 32, 20], 6: ['Q5_0', 32, 22], 7: ['Q5_1', 32, 24],
  8: ['Q8_0', 32, 34], 9: ['Q8_1', 32, 36], 10: ['Q2_K', 256, 84], 11: ['Q3_K', 256, 110], 12: ['Q4_K', 256, 144],
  13: ['Q5_K', 256, 176], 14: ['Q6_K', 256, 210], 15: ['Q8_K', 256, 292], 16: ['IQ2_XXS', 256, 66], 17: ['IQ2_XS', 256, 74],
  18: ['IQ3_XXS', 256, 98], 19: ['IQ1_S', 256, 50], 20: ['IQ4_NL', 32, 18], 21: ['IQ3_S', 256, 110], 22: ['IQ2_S', 256, 82],
  23: ['IQ4_XS', 256, 136], 24: ['I8', 1, 1], 25: ['I16', 1, 2], 26: ['I32', 1, 4], 27: ['I64', 1, 8], 28: ['F64', 1, 8],
  29: ['IQ1_M', 256, 56], 30: ['BF16', 1, 2], 34: ['TQ1_0', 256, 54], 35: ['TQ2_0', 256, 66], 39: ['MXFP4', 32, 17],
  40: ['NVFP4', 64, 36], 41: ['Q1_0', 128, 18], 42: ['Q2_0', 64, 18],
};

/** `general.file_type` names (llama.cpp's llama_ftype without its ALL_/MOSTLY_ prefix), by id. */
export const GGUF_FILE_TYPE_NAMES: readonly string[] = [
  'F32', 'F16', 'Q4_0', 'Q4_1', 'Q4_1_SOME_F16', 'Q4_2', 'Q4_3', 'Q8_0', 'Q5_0', 'Q5_1', 'Q2_K', 'Q3_K_S', 'Q3_K_M', 'Q3_K_L',
  'Q4_K_S', 'Q4_K_M', 'Q5_K_S', 'Q5_K_M', 'Q6_K', 'IQ2_XXS', 'IQ2_XS', 'Q2_K_S', 'IQ3_XS', 'IQ3_XXS', 'IQ1_S', 'IQ4_NL',
  'IQ3_S', 'IQ3_M', 'IQ2_S', 'IQ2_M', 'IQ4_XS', 'IQ1_M', 'BF16', 'Q4_0_4_4', 'Q4_0_4_8', 'Q4_0_8_8', 'TQ1_0', 'TQ2_0',
  'MXFP4_MOE', 'NVFP4', 'Q1_0', 'Q2_0',
];

export const GGUF_MAGIC = 'GGUF';
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** Magic, version, tensor count, metadata count. */
export const GGUF_FIXED_HEADER_BYTES = 24;

/**
 * Bounds on header counts: far above any real model (a few dozen metadata entries, and about a
 * thousand tensors for the largest, which write experts merged), and below what holds a slot
 * for long: llama.cpp's load grows with the square of either count (on a 2-core machine 10,000
 * metadata entries took 0.9 s and 100,000 took 132 s; 8,000 tensors 1 s, 32,000 16 s).
 */
export const MAX_TENSORS = 16_384;
export const MAX_METADATA_ENTRIES = 4_096;
/** The engine's own limits on one string and one array (llama.cpp's gguf.cpp). */
export const MAX_STRING_BYTES = 1024 ** 3;
export const MAX_ARRAY_ITEMS = 1024 ** 3;
/** gguf.md: a key is at most 65535 bytes. */
export const MAX_KEY_BYTES = 65_535;
/** ggml keeps a tensor name NUL-terminated in 64 bytes. */
export const MAX_TENSOR_NAME_BYTES = 63;
export const MAX_TENSOR_DIMS = 4;
/** The smallest tensor info, which bounds the tensor count by the bytes that remain. */
export const MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8; // name length, a 1-byte name, n_dims, one dim, type, offset
