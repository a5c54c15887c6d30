/**
 * Runs one body download in a worker thread against fakes, for download-body.test.ts: the
 * connection hands over a chunk, the disk refuses it (ENOSPC), and more body arrives afterwards.
 * Posts how receiveBody settled. A download that loops on the event loop's microtasks never
 * posts, and the test, on another thread, sees it.
 */
import { createHash } from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import { ProgressReporter, receiveBody } from '../../src/models/download-body.js';
import type { OpenedResponse } from '../../src/models/download-http.js';
import type { PartialSink } from '../../src/models/partial-file.js';

const chunk = Buffer.concat([Buffer.from('GGUF', 'latin1'), Buffer.alloc(60_000, 7)]);
const opened: OpenedResponse = {
  url: new URL('http://127.0.0.1/model.gguf'),
  status: 200,
  statusMessage: 'OK',
  headers: {} as OpenedResponse['headers'],
  async readBody(onChunk) {
    onChunk(chunk, 0, chunk.length);
    // The write fails meanwhile; bytes the socket had read already still arrive.
    await new Promise((resolve) => setTimeout(resolve, 20));
    onChunk(chunk, 4, chunk.length);
  },
  pause() {},
  resume() {},
  timeoutError: () => null,
  discard() {},
};
const sink: PartialSink = {
  append: () => Promise.reject(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })),
  sync: () => Promise.resolve(),
  close: () => Promise.resolve(),
};
const outcome = await receiveBody({
  opened, sink, plan: { kind: 'write', from: 0, bodyBytes: null, totalBytes: null },
  state: { size: 0, hash: createHash('sha256'), head: Buffer.alloc(0) },
  progress: new ProgressReporter(undefined, 1000), signal: new AbortController().signal,
}).then((bytes) => ({ resolved: bytes }), (error: Error) => ({ rejected: error.message }));
parentPort!.postMessage(outcome);
