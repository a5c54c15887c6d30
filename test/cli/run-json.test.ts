import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ResponseObject } from '../../src/api/types.js';
import { runCli } from '../helpers/cli.js';
import { withService } from '../helpers/service.js';

describe('lmsp run --json (LMSP section 12: one JSON document on stdout)', () => {
  test('prints the finished response object alone, the one the service keeps', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const ran = await runCli(['run', 'lmsp-tiny', 'say', 'something', '--seed', '2', '--max-tokens', '7', '--json', '--data-dir', service.dataDir]);
      assert.equal(ran.code, 0, ran.stderr);
      const printed = JSON.parse(ran.stdout) as ResponseObject;
      assert.equal(printed.object, 'response');
      assert.equal(printed.status, 'incomplete');
      assert.equal(printed.usage?.output_tokens, 7);
      const kept = (await service.client.getResponse(printed.id));
      assert.deepEqual(printed.output, kept.output);
    }));
});
