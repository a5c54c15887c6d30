/**
 * The tensor infos of a GGUF file and where their data lies (LMSP 5: a model file is untrusted
 * input): names, shapes, ggml types and offsets, each tensor's bytes inside the data section and
 * no two tensors sharing a byte. What it keeps per tensor is its name, offset and size, a small
 * multiple of the tensor info's own bytes in the header.
 */
import { GGML_TYPES, MAX_TENSOR_DIMS, MAX_TENSOR_NAME_BYTES } from './gguf-format.js';
import { count, invalidModelFile, quote, type HeaderReader } from './gguf-metadata.js';

export interface TensorLayout {
  /** The sum of the elements of every tensor. */
  parameters: number;
  dataOffset: number;
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
    const nameBytes = await reader.length(`the name of tensor #${index}`, MAX_TENSOR_NAME_BYTES);
    if (nameBytes === 0) throw invalidModelFile(`tensor #${index} at byte ${at} has an empty name`);
    await reader.need(nameBytes, `the name of tensor #${index}`);
    // latin1 keeps every byte, so two names are the same only when their bytes are.
    const name = cursor.text(nameBytes, 'latin1');
    const shown = quote(Buffer.from(name, 'latin1').toString('utf8'));
    if (seen.has(name)) throw invalidModelFile(`two tensors are named ${shown} (the second at byte ${at})`);
    seen.add(name);

    await reader.need(4, `the shape of tensor ${shown}`);
    const dims = cursor.u32();
    if (dims < 1 || dims > MAX_TENSOR_DIMS) throw invalidModelFile(`tensor ${shown} at byte ${at} has ${dims} dimensions (1 to ${MAX_TENSOR_DIMS})`);
    await reader.need(8 * dims + 4 + 8, `the info of tensor ${shown}`);
    const shape: number[] = [];
    let elements = 1;
    for (let dim = 0; dim < dims; dim++) {
      const extent = cursor.u64();
      shape.push(extent);
      if (extent === 0) throw invalidModelFile(`tensor ${shown} at byte ${at} has a dimension of 0`);
      // Exact products only: past 2^53 no file could hold the tensor anyway.
      if (extent > Number.MAX_SAFE_INTEGER / elements) {
        throw invalidModelFile(`tensor ${shown} at byte ${at} has dimensions ${shape.map(count).join(' x ')}, too many elements`);
      }
      elements *= extent;
    }
    const typeId = cursor.u32();
    const type = GGML_TYPES[typeId];
    if (type === undefined) throw invalidModelFile(`tensor ${shown} at byte ${at} has unknown ggml type ${typeId}`);
    const [typeName, blockElements, blockBytes] = type;
    if (shape[0]! % blockElements !== 0) {
      throw invalidModelFile(`tensor ${shown} of type ${typeName} has rows of ${shape[0]} elements, not a multiple of its block of ${blockElements}`);
    }
    const bytes = (elements / blockElements) * blockBytes;
    const offset = cursor.u64();
    if (offset % alignment !== 0) throw invalidModelFile(`tensor ${shown} has offset ${count(offset)}, not a multiple of the alignment ${alignment}`);
    // The data section starts at or after this point, so a tensor that ends past the file's end
    // from here is rejected now, before the rest of the table is read.
    if (offset + bytes > cursor.size - alignUp(cursor.position, alignment)) {
      throw invalidModelFile(`tensor ${shown} needs ${count(bytes)} bytes at offset ${count(offset)} of the data section, past the end of the file (truncated?)`);
    }
    if (offsets.length > 0 && offset < offsets[offsets.length - 1]!) ascending = false;
    names.push(name);
    offsets.push(offset);
    sizes.push(bytes);
    parameters += elements;
  }

  const headerEnd = cursor.position;
  const dataOffset = alignUp(headerEnd, alignment);
  if (reader.tensorCount > 0 && dataOffset > cursor.size) {
    throw invalidModelFile(`the header ends at byte ${headerEnd} and its data section would start at byte ${dataOffset}, past the end of the file (${cursor.size} bytes)`);
  }
  const dataBytes = cursor.size - dataOffset;
  const order = offsets.map((_, index) => index);
  if (!ascending) order.sort((a, b) => offsets[a]! - offsets[b]!);
  let previous = -1;
  for (const index of order) {
    const start = offsets[index]!;
    const end = start + sizes[index]!;
    const shown = quote(Buffer.from(names[index]!, 'latin1').toString('utf8'));
    if (end > dataBytes) {
      throw invalidModelFile(`tensor ${shown} lies at bytes ${dataOffset + start} to ${dataOffset + end} but the file has ${cursor.size} (truncated?)`);
    }
    if (previous >= 0 && start < offsets[previous]! + sizes[previous]!) {
      const other = quote(Buffer.from(names[previous]!, 'latin1').toString('utf8'));
      throw invalidModelFile(`tensors ${other} and ${shown} overlap in the data section`);
    }
    previous = index;
  }
  return { parameters, dataOffset };
}
