/**
 * LMSP section 12: the CLI sends the operator token only to a service it has verified to be its
 * data directory's. A stale service.json (the service crashed, something else now listens at its
 * address) must never receive the token.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { startModelServer, tinyModelBytes } from '../helpers/model-server.js';
import { LMSP_BIN, startService, waitFor } from '../helpers/service.js';

describe('the CLI and a stale service.json (LMSP section 12)', () => {
  test('a process listening at a dead service\'s address never gets the operator token', { timeout: 120_000 }, async () => {
    const service = await startService();
    const dataDir = service.dataDir;
    await service.kill();
    const seen: IncomingHttpHeaders[] = [];
    const impostor = createServer((request, response) => {
      seen.push(request.headers);
      response.writeHead(200, { 'content-type': 'application/json' });
      // It even claims to be an LMSP service, with its own id.
      response.end(JSON.stringify({ object: 'service', id: 'svc_impostor', protocol: 'lmsp', data: [], object_type: 'list' }));
    });
    await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
    const { port } = impostor.address() as AddressInfo;
    try {
      // A stale service.json naming a live process (this one) and the impostor's address.
      writeFileSync(join(dataDir, 'service.json'), JSON.stringify({ url: `http://127.0.0.1:${port}`, pid: process.pid, id: 'svc_impostor', version: '0', started_at: 0 }));
      const listed = await runCli(['models', 'ls', '--json', '--data-dir', dataDir]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.ok((JSON.parse(listed.stdout) as { data: Array<{ id: string }> }).data.some((model) => model.id === 'lmsp-tiny'), 'answered from the data directory');
      const clients = await runCli(['clients', 'ls', '--json', '--data-dir', dataDir]);
      assert.equal(clients.code, 0, clients.stderr);
      for (const headers of seen) assert.equal(headers.authorization, undefined, 'no token was sent to the impostor');

      // The data directory's service runs again (it holds the lock), but service.json now names
      // the impostor's address with the real service id: the impostor answers another id.
      const again = await service.restart();
      try {
        const info = JSON.parse(readFileSync(join(dataDir, 'service.json'), 'utf8')) as { id: string };
        writeFileSync(join(dataDir, 'service.json'), JSON.stringify({ ...info, url: `http://127.0.0.1:${port}` }));
        const models = await runCli(['models', 'ls', '--json', '--data-dir', dataDir]);
        assert.equal(models.code, 0, models.stderr);
        assert.ok(seen.length > 0, 'the CLI asked the address who it is');
        for (const headers of seen) assert.equal(headers.authorization, undefined, 'and sent it no token');
      } finally {
        await again.kill();
      }
    } finally {
      impostor.close();
    }
  });

  test('while a pull without a service holds the lock, the crashed service\'s address gets no token, even answering its id', { timeout: 120_000 }, async () => {
    const service = await startService();
    const dataDir = service.dataDir;
    const stale = JSON.parse(readFileSync(join(dataDir, 'service.json'), 'utf8')) as { url: string; id: string };
    await service.kill();
    const seen: IncomingHttpHeaders[] = [];
    // Whatever listens at the old address now can read the service id: GET /v1/service needs no token.
    const impostor = createServer((request, response) => {
      seen.push(request.headers);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ object: 'service', id: stale.id, protocol: 'lmsp', object_type: 'list', data: [] }));
    });
    await new Promise<void>((resolve) => impostor.listen(Number(new URL(stale.url).port), '127.0.0.1', resolve));
    const models = await startModelServer();
    const url = models.serve('/slow/held.gguf', tinyModelBytes());
    models.behave('/slow/held.gguf', { bytesPerSecond: 20_000 });
    // A plain http: source is allowed to the configured endpoint alone (LMSP 5.1).
    const pull = spawn(process.execPath, [LMSP_BIN, 'models', 'pull', url, '--id', 'held', '--data-dir', dataDir],
      { stdio: 'ignore', env: { ...process.env, LMSP_HF_ENDPOINT: models.url } });
    const exited = new Promise((resolve) => pull.on('close', resolve));
    try {
      const partial = join(dataDir, 'models', 'held.gguf.partial');
      await waitFor(() => existsSync(partial) && statSync(partial).size > 0, { timeoutMs: 30_000, what: 'the pull to hold the lock and download' });
      // No service runs: the command says so, rather than asking the impostor with the token.
      const tasks = await runCli(['tasks', 'ls', '--json', '--data-dir', dataDir]);
      assert.equal(tasks.code, 3, tasks.stderr);
      assert.equal((JSON.parse(tasks.stdout) as { error: { code: string } }).error.code, 'service_not_running');
      for (const headers of seen) assert.equal(headers.authorization, undefined, 'no token was sent to the impostor');
      assert.ok(!existsSync(join(dataDir, 'service.json')), 'the pull that took the lock removed the stale service.json');
    } finally {
      pull.kill('SIGKILL');
      await exited;
      impostor.close();
      models.close();
    }
  });
});
