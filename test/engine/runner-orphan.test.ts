/**
 * A runner whose service is gone (killed with SIGKILL while the runner started, or while it
 * worked) ends by itself, quietly: it shares the service's standard error, where a stack trace
 * of a closed channel would be noise in the operator's logs.
 */
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { RUNNER_SCRIPT } from '../../src/engine/runner-process.js';

describe('a runner without its service', () => {
  test('a runner whose channel closed before it said it was ready exits 0, writing nothing', { timeout: 60_000 }, async () => {
    const child = fork(RUNNER_SCRIPT, [], {
      env: { ...process.env, LMSP_RUNNER_SETTINGS: JSON.stringify({ gpu: 'cpu', threads: 1, stateDir: join(tmpdir(), 'lmsp-orphan-states'), tokenDelayMs: 0 }) },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'json',
    });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    // The service is gone at once: the runner is still loading its modules.
    child.disconnect();
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('exit', (...result) => resolve(result)));
    assert.deepEqual([code, signal], [0, null], output);
    assert.equal(output, '');
  });
});
