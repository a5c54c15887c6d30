/**
 * LMSP 5: "the path check of POST /v1/models does not reveal whether a file exists outside the
 * models directory". A file that exists there and one that does not get the same answer.
 */
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { makeDataDir } from '../helpers/data-dir.js';
import { api, withService } from '../helpers/service.js';

describe('the path check of POST /v1/models (LMSP 5)', () => {
  test('does not reveal whether a file exists outside the models directory', () => withService({}, async (service) => {
    const outside = makeDataDir('outside-models');
    writeFileSync(join(outside, 'exists.gguf'), 'GGUF');
    const models = join(service.dataDir, 'models');
    const answers: string[] = [];
    for (const path of [
      join(outside, 'exists.gguf'),
      join(outside, 'missing.gguf'),
      join(outside, 'no-such-folder', 'missing.gguf'),
      relative(models, join(outside, 'exists.gguf')),
      relative(models, join(outside, 'missing.gguf')),
    ]) {
      const response = await api(service, '/v1/models', { method: 'POST', json: { path } });
      assert.equal(response.status, 400, path);
      answers.push(JSON.stringify(await response.json()));
    }
    assert.equal(new Set(answers).size, 1, `one answer for all:\n${answers.join('\n')}`);
    assert.match(answers[0]!, /"code":"invalid_request".*must lie inside the models directory/);
    // Inside the models directory, a missing file is named as such.
    const missing = await api(service, '/v1/models', { method: 'POST', json: { path: 'missing.gguf' } });
    assert.match(((await missing.json()) as { error: { message: string } }).error.message, /no file at/);
    rmSync(outside, { recursive: true, force: true });
  }));
});
