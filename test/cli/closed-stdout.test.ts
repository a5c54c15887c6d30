import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import { LMSP_BIN, withService } from '../helpers/service.js';

describe('the lmsp CLI when its reader stops early (`lmsp tasks events ID | head`)', () => {
  test('ends quietly with status 0, without a stack trace', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const created = await service.client.createResponse({ model: 'lmsp-tiny', input: 'long log', max_output_tokens: 2000 });
      // Far more output than a pipe holds, so writes go on after the reader has closed its end.
      const child = spawn(process.execPath, [LMSP_BIN, 'tasks', 'events', created.body.task.id, '--json', '--data-dir', service.dataDir],
        { stdio: ['ignore', 'pipe', 'pipe'] });
      let errors = '';
      child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
      child.stdout.once('data', () => child.stdout.destroy());
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      assert.doesNotMatch(errors, /EPIPE|Unhandled|at /);
      assert.equal(code, 0, errors);
    }));
});
