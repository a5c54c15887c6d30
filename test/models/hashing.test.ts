/**
 * A registered model's file is hashed only where it was registered (LMSP 5): a link at the file or
 * at a folder above it that leads elsewhere is refused, while links that stay inside the models
 * directories (a data directory that is itself a link) are followed.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, realpathSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileStampOf } from '../../src/domain/models.js';
import { hashFile, LinkedPathError } from '../../src/models/hashing.js';
import { ModelRegistry } from '../../src/models/registry.js';
import { Store } from '../../src/store/index.js';
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

    assert.equal(await hashFile(join(models, 'm.gguf'), [models]), digestOf('model bytes'));
    assert.equal(await hashFile(join(models, 'm.gguf'), []), digestOf('model bytes'), 'the real path needs no models directory');
    // The models directory reached through a link of its own (a data directory moved elsewhere).
    symlinkSync(models, join(dir, 'models-link'));
    assert.equal(await hashFile(join(dir, 'models-link', 'm.gguf'), [models]), digestOf('model bytes'));
    await assert.rejects(hashFile(join(dir, 'models-link', 'm.gguf'), []), LinkedPathError);
    // A folder inside it replaced by a link that leads out, and a link at the file itself.
    symlinkSync(outside, join(models, 'etc'));
    await assert.rejects(hashFile(join(models, 'etc', 'secret'), [models]), LinkedPathError);
    symlinkSync(join(outside, 'secret'), join(models, 'secret.gguf'));
    await assert.rejects(hashFile(join(models, 'secret.gguf'), [models]), LinkedPathError);
  }));
});

describe('a model recorded through a link to its data directory', () => {
  test('still loads when the service runs with another --models-dir, as an earlier pull recorded it', () => withDataDir(async (dir) => {
    const real = join(dir, 'real');
    mkdirSync(real, { mode: 0o700 });
    const link = join(dir, 'link');
    symlinkSync(real, link);
    const store = Store.open(link);
    try {
      await new ModelRegistry(store, join(link, 'models')).ensureBuiltin();
      const builtin = store.models.get('lmsp-tiny')!;
      // Recorded by the path it was given, through the link, as pulls before this check did.
      const path = join(link, 'models', 'pulled.gguf');
      copyFileSync(builtin.path, path);
      store.db.transaction(() => store.models.insert({ ...builtin, id: 'pulled', path, builtin: false, ...fileStampOf(statSync(path, { bigint: true })) }));
      // The service now runs with another models directory; the file's time changed, so it is hashed again.
      const shared = join(dir, 'shared');
      mkdirSync(shared);
      const registry = new ModelRegistry(store, shared);
      utimesSync(path, new Date(), new Date(Date.now() - 60_000));
      assert.equal((await registry.checkBeforeLoad('pulled')).status, 'ready');
      assert.equal((await registry.measure('pulled')).status, 'ready');
    } finally {
      await store.close();
    }
  }));
});
