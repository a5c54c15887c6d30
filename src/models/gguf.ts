/**
 * What a GGUF file says about itself (LMSP section 5), learned by our own validator
 * (gguf-validator.ts), which turns a file that is not a usable model into `invalid_model_file`
 * before anything is registered or loaded.
 *
 * node-llama-cpp's GGUF reader no longer runs here: the validator reads every fact the registry
 * records, and that reader materialises whole arrays with no bounds of its own (a 35-byte file
 * crashed the service through it), so only validated files ever reach it, in a runner process.
 */
import { ServiceError } from '../domain/errors.js';
import { EngineError } from '../engine/engine.js';
import type { GgufFacts, Model } from '../domain/models.js';
import { GGUF_FILE_TYPE_NAMES } from './gguf-format.js';
import { validateGgufFile } from './gguf-validator.js';

function quantizationName(fileType: number | null): string | null {
  if (fileType === null) return null;
  return GGUF_FILE_TYPE_NAMES[fileType] ?? `type_${fileType}`;
}

/**
 * Validates a GGUF file and returns its facts; throws `invalid_model_file` for anything unusable.
 * `registered`: the file is read only at `path` or inside `within`, never through a link out.
 */
export async function readGgufFacts(path: string, registered?: { within: readonly string[] }): Promise<GgufFacts> {
  const structure = await validateGgufFile(path, registered ? { registered } : {});
  return {
    architecture: structure.architecture,
    contextLength: structure.contextLength,
    parameters: structure.parameters,
    quantization: quantizationName(structure.fileType),
    tokenizer: structure.tokenizerModel,
  };
}

/**
 * LMSP 5: the runner loads a file only after this validated it again, at every load: a file can
 * change on disk after registration (even keeping its size and modification time, which is all
 * the integrity check compares without re-hashing), and a record may predate the validator.
 * Reading a header is cheap next to loading a model.
 */
export async function validateBeforeLoad(model: Model, modelsDirs: readonly string[]): Promise<void> {
  try {
    await validateGgufFile(model.path, { registered: { within: modelsDirs } });
  } catch (error) {
    if (error instanceof ServiceError) throw new EngineError('model_load_failed', `model '${model.id}': ${error.message}`);
    throw error;
  }
}
