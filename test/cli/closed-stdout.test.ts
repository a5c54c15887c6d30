import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { LMSP_BIN, processAlive, waitFor, withService } from '../helpers/service.js';

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

describe('lmsp serve when the reader of its output leaves (`lmsp serve --json 2>&1 | head -c 10`)', () => {
  test('the service goes on answering, and stops on SIGTERM', { timeout: 90_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'lmsp-closed-'));
    try {
      // Standard output and error in one pipe whose reader is gone after 10 bytes.
      const shell = spawn('sh', ['-c', `"${process.execPath}" "${LMSP_BIN}" serve --port 0 --json --data-dir "${dataDir}" 2>&1 | head -c 10 >/dev/null`],
        { stdio: 'ignore' });
      const info = await waitFor(() => {
        try {
          return JSON.parse(readFileSync(join(dataDir, 'service.json'), 'utf8')) as { url: string; pid: number };
        } catch {
          return null;
        }
      }, { what: 'the service to start' });
      for (let i = 0; i < 5; i++) {
        // Each request logs nothing by itself; a pairing logs a line into the closed pipe.
        const answer = await fetch(`${info.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"code":"AAAA-AAAA","client_name":"x"}', signal: AbortSignal.timeout(5000) });
        assert.equal(answer.status, 401);
        assert.equal((await fetch(`${info.url}/healthz`, { signal: AbortSignal.timeout(5000) })).status, 200);
      }
      process.kill(info.pid, 'SIGTERM');
      await waitFor(() => !processAlive(info.pid), { timeoutMs: 20_000, what: 'the service to stop on SIGTERM' });
      if (shell.exitCode === null && shell.signalCode === null) await new Promise((resolve) => shell.once('exit', resolve));
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
