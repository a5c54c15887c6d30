/**
 * LMSP 5, 9: a load llama.cpp refuses fails with llama.cpp's reason, and never with the model's
 * file-system path, whatever characters it holds (a client without models:write reads the error).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadFailure } from '../../src/engine/load-failure.js';
import { withoutPaths } from '../../src/tasks/scheduler.js';

describe('the error of a refused model load', () => {
  const path = '/home/a user/My models, v2 (old)/data/models/bad model.gguf';

  test("says llama.cpp's reasons, the last three, each once, after node-llama-cpp's words", () => {
    const lines = ['llama_model_load: error loading model: missing tensor \'output_norm.weight\'\n', 'x', 'x', 'y', 'z', ''];
    assert.equal(loadFailure(new Error('Failed to load model'), lines, path).message,
      "Failed to load model (llama.cpp: x; y; z)");
    assert.equal(loadFailure(new Error('Failed to load model'), [], path).message, 'Failed to load model');
    assert.equal(loadFailure('thrown text', [], path).message, 'thrown text');
    assert.ok(loadFailure(new Error('e'), ['l'.repeat(1000)], path).message.length < 400, 'a long line is cut');
  });

  test('masks the model path and its folder whole, spaces, commas and brackets included, in what the client would see', () => {
    const lines = [`gguf_init_from_file: failed to open GGUF file '${path}'`, `llama_model_loader: failed to load model from ${path}`,
      `cannot list /home/a user/My models, v2 (old)/data/models`];
    const message = withoutPaths(`model_load_failed: ${loadFailure(new Error(`Failed to load model from ${path}`), lines, path).message}`);
    assert.equal(message, "model_load_failed: Failed to load model from <file> (llama.cpp: gguf_init_from_file: failed to open GGUF file '<file>'; "
      + 'llama_model_loader: failed to load model from <file>; cannot list <dir>)');
    for (const part of ['a user', 'My models', 'bad model', '/home']) assert.ok(!message.includes(part), `${part} in ${message}`);
  });
});
