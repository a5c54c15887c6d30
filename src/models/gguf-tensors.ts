/**
 * The tensor infos of a GGUF file and where their data lies (LMSP 5: a model file is untrusted
 * input): names, shapes, ggml types and offsets, the tensors' bytes one after the other inside
 * the data section, as llama.cpp reads them. What it keeps per tensor is its name, for the check
 * that no two share one.
 */
import { GGML_TYPES, MAX_TENSOR_DIMS, MAX_TENSOR_NAME_BYTES } from './gguf-format.js';
import { count, invalidModelFile, type HeaderReader } from './gguf-metadata.js';
import { quoteShort } from '../text.js';

export interface TensorLayout {
  /** The sum of the elements of every tensor. */
  parameters: number;
  dataOffset: number;
}

/** A tensor name for a message: its bytes as UTF-8, quoted. */
function show(name: string): string {
  return quoteShort(Buffer.from(name, 'latin1').toString('utf8'));
}

function alignUp(value: number, alignment: number): number {
  return Math.ceil(value / alignment) * alignment;
}

/** Reads the tensor infos that follow the metadata, then checks the data section they describe. */
export async function readTensorInfos(reader: HeaderReader): Promise<TensorLayout> {
  const { cursor, alignment } = reader;
  const seen = new Set<string>();
  /** Where the next tensor's data must start, relative to the data section. */
  let expected = 0;
  let last: { name: string; end: number } | null = null;
  let parameters = 0;
  for (let index = 0; index < reader.tensorCount; index++) {
    const at = cursor.position;
    const nameBytes = await reader.length(() => `the name of tensor #${index}`, MAX_TENSOR_NAME_BYTES);
    if (nameBytes === 0) throw invalidModelFile(`tensor #${index} at byte ${at} has an empty name`);
    await reader.need(nameBytes, () => `the name of tensor #${index}`);
    // latin1 keeps every byte, so two names are the same only when their bytes are.
    const name = cursor.text(nameBytes, 'latin1');
    if (seen.has(name)) throw invalidModelFile(`two tensors are named ${show(name)} (the second at byte ${at})`);
    seen.add(name);

    await reader.need(4, () => `the shape of tensor ${show(name)}`);
    const dims = cursor.u32();
    if (dims < 1 || dims > MAX_TENSOR_DIMS) throw invalidModelFile(`tensor ${show(name)} at byte ${at} has ${dims} dimensions (1 to ${MAX_TENSOR_DIMS})`);
    await reader.need(8 * dims + 4 + 8, () => `the info of tensor ${show(name)}`);
    const shape: number[] = [];
    let elements = 1;
    for (let dim = 0; dim < dims; dim++) {
      const extent = cursor.u64();
      shape.push(extent);
      if (extent === 0) throw invalidModelFile(`tensor ${show(name)} at byte ${at} has a dimension of 0`);
      // Exact products only: past 2^53 no file could hold the tensor anyway.
      if (extent > Number.MAX_SAFE_INTEGER / elements) {
        throw invalidModelFile(`tensor ${show(name)} at byte ${at} has dimensions ${shape.map(count).join(' x ')}, too many elements`);
      }
      elements *= extent;
    }
    const typeId = cursor.u32();
    const type = GGML_TYPES[typeId];
    if (type === undefined) throw invalidModelFile(`tensor ${show(name)} at byte ${at} has unknown ggml type ${typeId}`);
    const [typeName, blockElements, blockBytes] = type;
    if (shape[0]! % blockElements !== 0) {
      throw invalidModelFile(`tensor ${show(name)} of type ${typeName} has rows of ${shape[0]} elements, not a multiple of its block of ${blockElements}`);
    }
    const bytes = (elements / blockElements) * blockBytes;
    const offset = cursor.u64();
    if (offset % alignment !== 0) throw invalidModelFile(`tensor ${show(name)} has offset ${count(offset)}, not a multiple of the alignment ${alignment}`);
    // llama.cpp reads the data section as the tensors one after the other, in the order of their
    // infos, each padded to the alignment: it refuses a file whose offsets say otherwise (a gap,
    // another order, an overlap), so such a file would register and then never load.
    if (offset !== expected) {
      throw invalidModelFile(`tensor ${show(name)} has offset ${count(offset)} where ${count(expected)} was expected (the tensors' data lies one after the other, in the order of their infos, each padded to the alignment ${alignment})`);
    }
    expected = alignUp(offset + bytes, alignment);
    last = { name, end: offset + bytes };
    parameters += elements;
  }

  const headerEnd = cursor.position;
  const dataOffset = alignUp(headerEnd, alignment);
  // Negative when the padded header runs past the end: then the check below fails.
  const dataBytes = cursor.size - dataOffset;
  if (last && last.end > dataBytes) {
    throw invalidModelFile(`tensor ${show(last.name)} ends at byte ${count(dataOffset + last.end)} but the file has ${cursor.size} (truncated?)`);
  }
  return { parameters, dataOffset };
}
