/**
 * LMSP section 12: the CLI sends the operator token only to a service it has verified to be its
 * data directory's. A stale service.json (the service crashed, something else now listens at its
 * address) must never receive the token.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { startService } from '../helpers/service.js';

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
});
