/**
 * LMSP 5: `verify` re-hashes the registered model. One removed while its file was hashed, and its
 * id registered again for another file, must not have the old record written back over the new.
 */
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ServiceError } from '../../src/domain/errors.js';
import { buildSyntheticModel, LMSP_TINY } from '../../src/engine/synthetic-model.js';
import { writeGgufFile } from '../../src/engine/gguf-writer.js';
import { ModelRegistry } from '../../src/models/registry.js';
import { Store } from '../../src/store/index.js';
import { registerModel, verifyModel } from '../../src/tasks/models.js';
import { withDataDir } from '../helpers/data-dir.js';

describe('a verify that races a new registration of its id', () => {
  test('is answered model_not_found and leaves the new registration as it is', () => withDataDir(async (dir) => {
    const store = Store.open(dir);
    try {
      const registry = new ModelRegistry(store, join(dir, 'models'));
      await registry.ensureBuiltin();
      const deps = { store, registry };
      copyFileSync(join(dir, 'models', 'lmsp-tiny.gguf'), join(dir, 'models', 'first.gguf'));
      writeGgufFile(join(dir, 'models', 'second.gguf'), buildSyntheticModel({ ...LMSP_TINY, name: 'second' }));
      const options = { restrictToModelsDir: true };
      await registerModel(deps, { path: 'first.gguf', id: 'm' }, options, null);
      const replacement = { ...(await registry.inspect({ path: 'second.gguf', id: 'other' }, options)), id: 'm' };
      assert.notEqual(replacement.digest, registry.get('m')!.digest);

      let replaced = false;
      const verify = verifyModel(deps, 'm', null, () => {
        if (replaced) return;
        replaced = true;
        // Another client, while the file is read: DELETE /v1/models/m, then POST /v1/models for another file.
        store.models.delete('m');
        store.models.insert(replacement);
      });
      await assert.rejects(verify, (error: unknown) => error instanceof ServiceError && error.code === 'model_not_found' && /registered again/.test(error.message));
      assert.ok(replaced, 'the file was hashed with progress reported');
      const now = registry.get('m')!;
      assert.deepEqual([now.path, now.digest, now.sizeBytes], [replacement.path, replacement.digest, replacement.sizeBytes]);
      // A verify of the model registered now records it.
      const verified = await verifyModel(deps, 'm', null);
      assert.ok('model' in verified);
      assert.deepEqual([verified.model.status, verified.model.digest], ['ready', replacement.digest]);
    } finally {
      store.close();
    }
  }));
});
