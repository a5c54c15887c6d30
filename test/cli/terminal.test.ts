/**
 * The CLI on a terminal (LMSP 12): run through `script`, which gives the command a pseudo-terminal
 * that nobody sized (0 columns, as in some containers and CI runners). `lmsp run` erases its
 * loading status before the text; `lmsp top` draws whole frames.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { makeDataDir } from '../helpers/data-dir.js';
import { startModelServer, tinyModelBytes } from '../helpers/model-server.js';
import { childPids, LMSP_BIN, processAlive, waitFor, withService } from '../helpers/service.js';

/** Runs the CLI with a pseudo-terminal for its standard streams; `keys` are typed after `typeAfterMs`. */
function onTerminal(args: string[], keys = '', typeAfterMs = 0, env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  const command = [process.execPath, LMSP_BIN, ...args].map((word) => `'${word.replace(/'/g, `'\\''`)}'`).join(' ');
  const child = spawn('script', ['-qec', command, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  if (keys) setTimeout(() => child.stdin.write(keys), typeAfterMs);
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) => child.on('close', (code) => {
    clearTimeout(timer);
    resolve({ code, output });
  }));
}

describe('the CLI on a terminal (LMSP 12)', () => {
  test('lmsp models pull ends its progress bar at 100% when the pull completes, with the service running or not', { timeout: 120_000 }, async () => {
    const server = await startModelServer();
    try {
      const bytes = tinyModelBytes();
      const check = (output: string) => {
        const percents = [...output.matchAll(/(\d+)% \|/g)].map((match) => Number(match[1]));
        assert.ok(percents.length > 0, JSON.stringify(output));
        assert.equal(percents.at(-1), 100, `the last figure drawn: ${JSON.stringify(output.slice(-400))}`);
      };
      await withService({ env: { LMSP_HF_ENDPOINT: server.url } }, async (service) => {
        const url = server.serve('/bar/online.gguf', bytes);
        // Over about 2.5 s: progress events come once a second, so the last one is short of the end.
        server.behave('/bar/online.gguf', { bytesPerSecond: Math.ceil(bytes.length / 2.5) });
        const pulled = await onTerminal(['models', 'pull', url, '--id', 'bar-online', '--data-dir', service.dataDir]);
        assert.equal(pulled.code, 0, pulled.output);
        check(pulled.output);
      });
      const dataDir = makeDataDir('bar-offline');
      const url = server.serve('/bar/offline.gguf', bytes);
      server.behave('/bar/offline.gguf', { bytesPerSecond: Math.ceil(bytes.length / 2.5) });
      const pulled = await onTerminal(['models', 'pull', url, '--id', 'bar-offline', '--data-dir', dataDir], '', 0, { LMSP_HF_ENDPOINT: server.url });
      assert.equal(pulled.code, 0, pulled.output);
      check(pulled.output);
    } finally {
      await server.close();
    }
  });

  test('lmsp run erases its loading status before the text comes, so the two never mix on the line', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const run = await onTerminal(['run', 'lmsp-tiny', 'hi', '--max-tokens', '4', '--seed', '1', '--data-dir', service.dataDir]);
      assert.equal(run.code, 0, run.output);
      // The status, then the line erased (carriage return, erase line), then the text.
      const erased = 'loading lmsp-tiny…\r\u001b[2K';
      const at = run.output.indexOf(erased);
      assert.ok(at >= 0, JSON.stringify(run.output));
      assert.match(run.output.slice(at + erased.length), /^[^\r]+\r\n\[incomplete: /);
    }));

  test('lmsp top draws whole frames on a terminal that reports no width, and q quits', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const top = await onTerminal(['top', '--data-dir', service.dataDir], 'q', 3000);
      assert.equal(top.code, 0, top.output);
      assert.match(top.output, /queued 0 {3}running 0/);
      assert.match(top.output, /no unfinished tasks/);
    }));

  test('lmsp top says so when the service stops answering, and goes on trying', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const top = onTerminal(['top', '--interval', '500ms', '--data-dir', service.dataDir], 'q', 4000);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await service.kill();
      const ended = await top;
      assert.equal(ended.code, 0, ended.output);
      assert.match(ended.output, new RegExp(`the service at ${service.url} is not answering; trying again every 0\\.5 s`));
      assert.doesNotMatch(ended.output, /fetch failed/);
    }));

  test('lmsp top follows the service when it comes back on another port', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const top = onTerminal(['top', '--interval', '500ms', '--data-dir', service.dataDir], 'q', 9000);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await service.kill();
      const again = await service.restart({ args: ['--name', 'renamed'] }); // port 0: another port
      try {
        const ended = await top;
        assert.equal(ended.code, 0, ended.output);
        const lastMiss = ended.output.lastIndexOf('is not answering');
        assert.ok(lastMiss > 0, 'it saw the service go');
        assert.match(ended.output.slice(lastMiss), /queued 0 {3}running 0/, `frames again from ${again.url}`);
        assert.match(ended.output.slice(lastMiss), /renamed/, 'the service as it is now: its name read again');
      } finally {
        await again.kill();
      }
    }));

  test('SIGHUP: lmsp serve on a terminal stops cleanly (the terminal went away); on none, as under nohup, it goes on', { timeout: 90_000 }, async () => {
    const dataDir = makeDataDir('hangup');
    const serve = onTerminal(['serve', '--port', '0', '--data-dir', dataDir]);
    const serviceFile = join(dataDir, 'service.json');
    const { pid } = await waitFor(() => (existsSync(serviceFile) ? JSON.parse(readFileSync(serviceFile, 'utf8')) as { pid: number } : null),
      { what: 'the service on a terminal to start' });
    process.kill(pid, 'SIGHUP');
    const ended = await serve;
    assert.equal(ended.code, 0, ended.output);
    assert.match(ended.output, /stopping: unfinished tasks stay on disk/);
    assert.ok(!existsSync(serviceFile), 'a clean stop removes service.json');

    // A shell that exits sends SIGHUP to the whole process group of a job, its runners included.
    await withService({ env: { LMSP_LOG_LEVEL: 'info' }, ownProcessGroup: true }, async (service) => {
      assert.equal((await service.client.createResponse({ model: 'lmsp-tiny', input: 'hi', max_output_tokens: 2 })).body.status, 'incomplete');
      const runners = childPids(service.pid);
      assert.ok(runners.length > 0, 'a runner is running');
      process.kill(-service.pid, 'SIGHUP');
      await waitFor(() => /SIGHUP ignored/.test(service.output()), { what: 'the service to log the SIGHUP it ignores' });
      assert.ok(processAlive(service.pid), 'the service goes on');
      for (const runner of runners) assert.ok(processAlive(runner), `runner ${runner} goes on`);
      assert.equal((await service.client.createResponse({ model: 'lmsp-tiny', input: 'hi', max_output_tokens: 2 })).body.status, 'incomplete');
      assert.doesNotMatch(service.output(), /exited unexpectedly/);
    });
  });

  test('the terminal of lmsp serve going away (its window closed) stops it cleanly, with exit 0: nothing is written to it any more, and Node\'s exit does not abort on it; a log sent to a file says it stopped', { timeout: 90_000 }, async () => {
    for (const logTo of ['terminal', 'file'] as const) {
      const dataDir = makeDataDir('hangup-terminal');
      // The shell, which the hangup reaches first, passes it on to the service (as an interactive
      // shell does to its jobs) and writes down how the service ended, not on the terminal.
      const script = join(dataDir, 'serve.sh');
      writeFileSync(script, `"$NODE" "$BIN" serve --port 0 --data-dir "$DIR" --log-level info ${logTo === 'file' ? '> "$DIR/serve.log" 2>&1 < /dev/tty ' : ''}&\npid=$!\n`
        + 'trap \'kill -HUP $pid; wait $pid; echo $? > "$DIR/exit-status"; exit\' HUP\nwait $pid\n');
      const terminal = spawn('script', ['-qec', `sh ${script}`, '/dev/null'], {
        stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, NODE: process.execPath, BIN: LMSP_BIN, DIR: dataDir },
      });
      terminal.stdout.resume();
      const serviceFile = join(dataDir, 'service.json');
      await waitFor(() => existsSync(serviceFile), { what: 'the service on a terminal to start' });
      terminal.kill('SIGKILL'); // the terminal's other end closes: the kernel hangs the terminal up
      const status = await waitFor(() => (existsSync(join(dataDir, 'exit-status')) ? readFileSync(join(dataDir, 'exit-status'), 'utf8').trim() : null),
        { timeoutMs: 30_000, what: 'the service to end with its terminal' });
      assert.equal(status, '0', `log to the ${logTo}: a clean stop, not a crash or an abort`);
      assert.ok(!existsSync(serviceFile), 'a clean stop removes service.json');
      if (logTo === 'file') assert.match(readFileSync(join(dataDir, 'serve.log'), 'utf8'), /"signal":"SIGHUP".*stopping: unfinished tasks stay on disk/);
    }
  });
});
