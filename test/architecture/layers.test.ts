/**
 * The rule of the layers (docs/architecture.md): the lint rule that keeps dependencies pointing
 * down the floors of src/ catches an import that points up or sideways, and src/ has none.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ESLint } from 'eslint';
import { PACKAGE_ROOT } from '../../src/paths.js';

const eslint = new ESLint({ cwd: PACKAGE_ROOT });

async function restrictedImports(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return result!.messages.filter((message) => message.ruleId === 'no-restricted-imports').map((message) => message.message);
}

describe('the rule of the layers', () => {
  const upward: Array<[string, string]> = [
    ['src/store/example.ts', "import type { ResponseObject } from '../api/types.js';"],
    ['src/store/example.ts', "import { followTask } from '../tasks/follow.js';"],
    ['src/engine/example.ts', "import type { Task } from '../tasks/task-machine.js';"],
    ['src/domain/example.ts', "import { nowSeconds } from '../time.js';"],
    ['src/api/example.ts', "import type { Store } from '../store/index.js';"],
    ['src/models/example.ts', "import { authenticate } from '../auth/clients.js';"],
    ['src/tasks/example.ts', "import { buildApp } from '../http/app.js';"],
    ['src/http/routes/example.ts', "import { startService } from '../../service.js';"],
    ['src/http/example.ts', "import { registerServe } from '../cli/commands/serve.js';"],
    ['src/time.ts', "import { Store } from './store/index.js';"],
  ];
  for (const [filePath, code] of upward) {
    test(`refuses, in ${filePath}: ${code}`, async () => {
      const messages = await restrictedImports(filePath, `${code}\nexport {};\n`);
      assert.equal(messages.length, 1, `expected the layer rule to refuse it, got ${JSON.stringify(messages)}`);
    });
  }

  const downward: Array<[string, string]> = [
    ['src/tasks/example.ts', "import type { Store } from '../store/index.js';"],
    ['src/http/routes/example.ts', "import { createResponse } from '../../tasks/responses.js';"],
    ['src/store/example.ts', "import type { Task } from '../domain/tasks.js';"],
    ['src/cli/example.ts', "import { startService } from '../service.js';"],
    ['src/engine/example.ts', "import { sleep } from '../time.js';"],
  ];
  for (const [filePath, code] of downward) {
    test(`allows, in ${filePath}: ${code}`, async () => {
      assert.deepEqual(await restrictedImports(filePath, `${code}\nexport {};\n`), []);
    });
  }

  test('no file of src/ breaks it', async () => {
    const results = await eslint.lintFiles(['src']);
    const broken = results.flatMap((result) => result.messages
      .filter((message) => message.ruleId === 'no-restricted-imports')
      .map((message) => `${result.filePath}:${message.line}: ${message.message}`));
    assert.deepEqual(broken, []);
  });
});
