import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { packagePath } from '../../src/paths.js';
import { pairClient, withService } from '../helpers/service.js';

describe('examples/openai-chat.mjs', () => {
  test('runs against the service', { timeout: 60_000 }, () => withService({}, async (service) => {
    const { token } = await pairClient(service, ['responses', 'models:read'], 'example');
    const result = spawnSync(process.execPath, [packagePath('examples', 'openai-chat.mjs')], {
      env: { ...process.env, LMSP_BASE_URL: `${service.url}/v1`, LMSP_TOKEN: token },
      encoding: 'utf8',
      timeout: 50_000,
    });
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /^plain \(length, task task_\w+\): .+/m);
    assert.match(result.stdout, /^stream usage: 40 tokens$/m);
    assert.match(result.stdout, /^tool call: add\(\{.*\}\)$/m);
    assert.match(result.stdout, /^stored: chatcmpl-\w+$/m);
  }));
});
