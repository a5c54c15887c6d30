/**
 * A registered model's file is hashed only where it was registered (LMSP 5): a link at the file or
 * at a folder above it that leads elsewhere is refused, while links that stay inside the models
 * directory (a data directory that is itself a link) are followed.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { hashFile, LinkedPathError } from '../../src/models/hashing.js';
import { withDataDir } from '../helpers/data-dir.js';

const digestOf = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`;

describe('hashing a registered model file', () => {
  test('at its real path; through links inside the models directory; never through one that leads out of it', () => withDataDir(async (dir) => {
    const models = join(realpathSync(dir), 'models');
    mkdirSync(models);
    writeFileSync(join(models, 'm.gguf'), 'model bytes');
    const outside = join(realpathSync(dir), 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'secret'), 'not for you');

    assert.equal(await hashFile(join(models, 'm.gguf'), models), digestOf('model bytes'));
    assert.equal(await hashFile(join(models, 'm.gguf'), null), digestOf('model bytes'), 'the real path needs no models directory');
    // The models directory reached through a link of its own (a data directory moved elsewhere).
    symlinkSync(models, join(dir, 'models-link'));
    assert.equal(await hashFile(join(dir, 'models-link', 'm.gguf'), models), digestOf('model bytes'));
    await assert.rejects(hashFile(join(dir, 'models-link', 'm.gguf'), null), LinkedPathError);
    // A folder inside it replaced by a link that leads out, and a link at the file itself.
    symlinkSync(outside, join(models, 'etc'));
    await assert.rejects(hashFile(join(models, 'etc', 'secret'), models), LinkedPathError);
    symlinkSync(join(outside, 'secret'), join(models, 'secret.gguf'));
    await assert.rejects(hashFile(join(models, 'secret.gguf'), models), LinkedPathError);
  }));
});
