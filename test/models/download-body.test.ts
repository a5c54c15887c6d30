/**
 * The body writer of a pull (LMSP 5.1) when the disk fills while the body still arrives: the
 * download ends with the disk-full failure instead of looping for good (it once awaited a
 * promise it had already settled, in a loop of microtasks that starved the whole service).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';

describe('the body writer of a download (LMSP 5.1)', () => {
  test('a write refused for a full disk, then more body: the download fails, saying so, and the thread goes on', async () => {
    const worker = new Worker(new URL('./download-body-worker.js', import.meta.url));
    try {
      const outcome = await Promise.race([
        new Promise<{ resolved?: number; rejected?: string }>((resolve, reject) => {
          worker.once('message', resolve);
          worker.once('error', reject);
        }),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the download never settled: its thread is stuck')), 10_000)),
      ]);
      assert.equal(outcome.resolved, undefined);
      assert.match(outcome.rejected ?? '', /disk is full/);
    } finally {
      await worker.terminate();
    }
  });
});
