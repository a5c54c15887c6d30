/**
 * The tensor infos of a GGUF file and where their data lies (LMSP 5: a model file is untrusted
 * input): names, shapes, ggml types and offsets, each tensor's bytes inside the data section and
 * no two tensors sharing a byte. What it keeps per tensor is its name, offset and size, a small
 * multiple of the tensor info's own bytes in the header.
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
  const names: string[] = [];
  const seen = new Set<string>();
  const offsets: number[] = [];
  const sizes: number[] = [];
  let ascending = true;
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
    if (offsets.length > 0 && offset < offsets[offsets.length - 1]!) ascending = false;
    names.push(name);
    offsets.push(offset);
    sizes.push(bytes);
    parameters += elements;
  }

  const headerEnd = cursor.position;
  const dataOffset = alignUp(headerEnd, alignment);
  // Negative when the padded header runs past the end: then every tensor fails the check below.
  const dataBytes = cursor.size - dataOffset;
  const order = offsets.map((_, index) => index);
  if (!ascending) order.sort((a, b) => offsets[a]! - offsets[b]!);
  let previous = -1;
  for (const index of order) {
    const start = offsets[index]!;
    const end = start + sizes[index]!;
    const shown = show(names[index]!);
    if (end > dataBytes) {
      throw invalidModelFile(`tensor ${shown} lies at bytes ${count(dataOffset + start)} to ${count(dataOffset + end)} but the file has ${cursor.size} (truncated?)`);
    }
    if (previous >= 0 && start < offsets[previous]! + sizes[previous]!) {
      const other = show(names[previous]!);
      throw invalidModelFile(`tensors ${other} and ${shown} overlap in the data section`);
    }
    previous = index;
  }
  return { parameters, dataOffset };
}
