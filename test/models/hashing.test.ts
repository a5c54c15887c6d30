/**
 * A registered model's file is hashed only where it was registered (LMSP 5): a link at the file or
 * at a folder above it that leads elsewhere is refused, while links that stay inside the models
 * directories (a data directory that is itself a link) are followed.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, copyFileSync, mkdirSync, realpathSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ServiceError } from '../../src/domain/errors.js';
import { fileStampOf } from '../../src/domain/models.js';
import { ChangedWhileReadError, hashFile, LinkedPathError, NotRegularFileError } from '../../src/models/hashing.js';
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

    assert.equal((await hashFile(join(models, 'm.gguf'), [models])).digest, digestOf('model bytes'));
    assert.equal((await hashFile(join(models, 'm.gguf'), [])).digest, digestOf('model bytes'), 'the real path needs no models directory');
    // The models directory reached through a link of its own (a data directory moved elsewhere).
    symlinkSync(models, join(dir, 'models-link'));
    assert.equal((await hashFile(join(dir, 'models-link', 'm.gguf'), [models])).digest, digestOf('model bytes'));
    await assert.rejects(hashFile(join(dir, 'models-link', 'm.gguf'), []), LinkedPathError);
    // A folder inside it replaced by a link that leads out, and a link at the file itself.
    symlinkSync(outside, join(models, 'etc'));
    await assert.rejects(hashFile(join(models, 'etc', 'secret'), [models]), LinkedPathError);
    symlinkSync(join(outside, 'secret'), join(models, 'secret.gguf'));
    await assert.rejects(hashFile(join(models, 'secret.gguf'), [models]), LinkedPathError);
  }));
});

describe('hashing reads one version of one regular file', () => {
  const MIB = 1024 * 1024;

  test('a FIFO at the path is refused at once, not waited on (the open would block the whole service until a writer came)', () => withDataDir(async (dir) => {
    const fifo = join(realpathSync(dir), 'm.gguf');
    execFileSync('mkfifo', [fifo]);
    // In a process of its own: a blocking open would hang this one, and its test timeout with it.
    const hashing = new URL('../../src/models/hashing.js', import.meta.url).href;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e',
      `import { hashFile } from ${JSON.stringify(hashing)};
       hashFile(${JSON.stringify(fifo)}, []).then(() => console.log('read'), (error) => console.log(error.name));`], { timeout: 10_000, encoding: 'utf8' });
    assert.equal(child.signal, null, 'the hash returned instead of waiting for a writer');
    assert.equal(child.stdout.trim(), 'NotRegularFileError');
    // And in this process, now that it is known not to block.
    await assert.rejects(hashFile(fifo, []), NotRegularFileError);
    await assert.rejects(hashFile(realpathSync(dir), []), NotRegularFileError, 'a folder');
  }));

  test('a file that grows, is rewritten or is removed while it is hashed is ChangedWhileReadError, and a growing file is read only as far as it was long', () => withDataDir(async (dir) => {
    const path = join(realpathSync(dir), 'm.gguf');
    const writeModel = () => writeFileSync(path, Buffer.alloc(8 * MIB, 7));
    writeModel();
    const whole = await hashFile(path, []);
    assert.equal(whole.digest, `sha256:${createHash('sha256').update(Buffer.alloc(8 * MIB, 7)).digest('hex')}`);
    assert.equal(whole.stamp.sizeBytes, 8 * MIB);
    let read = 0;
    const grows = hashFile(path, [], (bytes) => {
      if (read === 0) appendFileSync(path, Buffer.alloc(4 * MIB, 1));
      read = bytes;
    });
    await assert.rejects(grows, ChangedWhileReadError);
    assert.ok(read <= 8 * MIB, `read ${read} bytes of a file that was 8 MiB when opened`);
    writeModel();
    let rewritten = false;
    await assert.rejects(hashFile(path, [], () => {
      if (!rewritten) writeFileSync(path, Buffer.alloc(8 * MIB, 9)); // the same size, in place
      rewritten = true;
    }), ChangedWhileReadError);
    writeModel();
    let removed = false;
    await assert.rejects(hashFile(path, [], () => {
      if (!removed) rmSync(path);
      removed = true;
    }), ChangedWhileReadError);
  }));

  test('registering a file that changes or is removed while it is hashed is 400 invalid_model_file, and records nothing', () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      const registry = new ModelRegistry(store, join(dir, 'models'));
      await registry.ensureBuiltin();
      const original = store.models.get('lmsp-tiny')!.path;
      const path = join(dir, 'models', 'copy.gguf');
      for (const [what, change] of [
        ['grows', () => appendFileSync(path, Buffer.alloc(MIB))],
        ['removed', () => rmSync(path)],
      ] as const) {
        copyFileSync(original, path);
        let changed = false;
        const refused = await registry.inspect({ path: 'copy.gguf', id: `copy-${what}` }, {
          restrictToModelsDir: true,
          onProgress: () => {
            if (!changed) change();
            changed = true;
          },
        }).catch((error: unknown) => error);
        assert.ok(refused instanceof ServiceError, `${what}: ${String(refused)}`);
        assert.equal(refused.code, 'invalid_model_file', what);
        assert.equal(refused.status, 400, what);
        assert.match(refused.message, /changed while it was read/, what);
        assert.equal(store.models.get(`copy-${what}`), null, `${what}: nothing recorded`);
      }
    } finally {
      await store.close();
    }
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
