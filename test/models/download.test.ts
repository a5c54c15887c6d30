import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DownloadAbortedError, DownloadError } from '../../src/models/download-errors.js';
import { downloadModel, modelPathOf, partialPathOf, type DownloadOptions, type DownloadProgress, type ResumeState } from '../../src/models/download.js';
import { readGgufFacts } from '../../src/models/gguf.js';
import { parsePullSource, pullSettingsFromEnvironment } from '../../src/models/pull-source.js';
import { withDataDir } from '../helpers/data-dir.js';
import { sha256Digest, startModelServer, tinyModelBytes, type ModelServer } from '../helpers/model-server.js';

const MODEL = tinyModelBytes();
const HALF = Math.floor(MODEL.length / 2);

let server: ModelServer;
before(async () => {
  server = await startModelServer();
});
after(() => server.close());

/** A download of `path` on the test server into `modelsDir`, as the pull task will call it. */
function options(modelsDir: string, path: string, extra: Partial<DownloadOptions> = {}): DownloadOptions {
  const settings = pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: server.url });
  return { source: parsePullSource(`${server.url}${path}`, settings), settings, modelsDir, id: 'tiny', ...extra };
}

/** Starts a throttled download and aborts it once about half of the file is on disk. */
async function abortHalfway(modelsDir: string, path: string): Promise<{ error: DownloadAbortedError; state: ResumeState; abortToReject: number }> {
  server.behaveOnce(path, { bytesPerSecond: 400_000 });
  const controller = new AbortController();
  let state: ResumeState | null = null;
  let abortedAt = 0;
  const download = downloadModel(options(modelsDir, path, {
    signal: controller.signal,
    progressIntervalMs: 10,
    onResumeState: (recorded) => void (state = recorded),
    onProgress: ({ downloadedBytes }) => {
      if (downloadedBytes >= HALF && !controller.signal.aborted) {
        abortedAt = performance.now();
        controller.abort();
      }
    },
  }));
  const error = await download.then(() => assert.fail('the download was aborted'), (caught: unknown) => caught);
  assert.ok(error instanceof DownloadAbortedError, `aborted, not ${String(error)}`);
  assert.ok(state, 'the resume state was reported before the first byte');
  return { error, state, abortToReject: performance.now() - abortedAt };
}

describe('model download (LMSP 5.1)', () => {
  test('beforePublish gets the whole file\'s digest and size, and the move waits for it', () => withDataDir(async (modelsDir) => {
    server.serve('/publish/tiny.gguf', MODEL);
    const seen: Array<{ digest: string; sizeBytes: number }> = [];
    const result = await downloadModel(options(modelsDir, '/publish/tiny.gguf', {
      beforePublish: async (file) => {
        await new Promise((resolve) => setImmediate(resolve));
        assert.ok(!existsSync(modelPathOf(modelsDir, 'tiny')), 'not yet moved into place');
        assert.ok(existsSync(partialPathOf(modelsDir, 'tiny')));
        seen.push(file);
      },
    }));
    assert.deepEqual(seen, [{ digest: sha256Digest(MODEL), sizeBytes: MODEL.length }]);
    assert.ok(existsSync(result.path));
  }));

  test('downloads into <id>.gguf.partial, then moves it into place with its size and sha256 digest', () => withDataDir(async (modelsDir) => {
    server.serve('/plain/tiny.gguf', MODEL);
    const states: ResumeState[] = [];
    const result = await downloadModel(options(modelsDir, '/plain/tiny.gguf', {
      onResumeState: (state) => {
        assert.ok(!existsSync(modelPathOf(modelsDir, 'tiny')), 'the state is reported before the file is done');
        states.push(state);
      },
      validate: async (path) => {
        assert.equal(path, partialPathOf(modelsDir, 'tiny'), 'validation runs on the partial file');
        assert.equal(readFileSync(path).length, MODEL.length, 'the partial file is whole when validated');
        await readGgufFacts(path);
      },
    }));
    assert.equal(result.path, join(modelsDir, 'tiny.gguf'));
    assert.equal(result.sizeBytes, MODEL.length);
    assert.equal(result.digest, sha256Digest(MODEL));
    assert.deepEqual([result.resumedFromBytes, result.transferredBytes], [0, MODEL.length]);
    assert.ok(readFileSync(result.path).equals(MODEL));
    assert.ok(!existsSync(partialPathOf(modelsDir, 'tiny')), 'no partial file is left');
    assert.deepEqual(states, [{ url: `${server.url}/plain/tiny.gguf`, etag: states[0]!.etag, lastModified: null, totalBytes: MODEL.length, seen: { etag: states[0]!.etag, lastModified: null } }]);
    assert.ok(states[0]!.etag, 'the ETag is recorded for If-Range');
    const [request] = server.requestsTo('/plain/tiny.gguf');
    assert.equal(request!.range, null, 'a fresh download asks for the whole file');
  }, 'pull-plain'));

  test('hf: sources are fetched from <LMSP_HF_ENDPOINT>/OWNER/REPO/resolve/REVISION/FILE', () => withDataDir(async (modelsDir) => {
    const sourceText = server.serveHf({ owner: 'lmsp', repo: 'tiny-GGUF', file: 'q8/lmsp-tiny.Q8_0.gguf', revision: 'v1.0' }, MODEL);
    const settings = pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: server.url });
    const result = await downloadModel({ source: parsePullSource(sourceText, settings), settings, modelsDir, id: 'lmsp-tiny.q8_0' });
    assert.equal(result.digest, sha256Digest(MODEL));
    assert.equal(server.requestsTo('/lmsp/tiny-GGUF/resolve/v1.0/q8/lmsp-tiny.Q8_0.gguf').length, 1);
  }, 'pull-hf'));

  test('progress: bytes, total and rate, at most once per interval', () => withDataDir(async (modelsDir) => {
    server.serve('/slow/tiny.gguf', MODEL);
    server.behaveOnce('/slow/tiny.gguf', { bytesPerSecond: 1_000_000 });
    const reports: DownloadProgress[] = [];
    const intervalMs = 100;
    const started = performance.now();
    await downloadModel(options(modelsDir, '/slow/tiny.gguf', { progressIntervalMs: intervalMs, onProgress: (progress) => reports.push(progress) }));
    const elapsed = performance.now() - started;
    assert.ok(reports.length >= 2, `several reports during a throttled download (${reports.length})`);
    // At most one report per interval: n reports need at least (n - 1) intervals between them.
    assert.ok(reports.length <= 1 + Math.floor(elapsed / intervalMs), `${reports.length} reports in ${Math.round(elapsed)} ms`);
    for (let i = 1; i < reports.length; i++) assert.ok(reports[i]!.downloadedBytes > reports[i - 1]!.downloadedBytes, 'each report has new bytes');
    for (const report of reports) {
      assert.equal(report.totalBytes, MODEL.length);
      assert.ok(report.bytesPerSecond > 0 && report.downloadedBytes <= MODEL.length);
    }
  }, 'pull-progress'));

  test('a download shorter than the interval reports once, at its end, with the whole size', () => withDataDir(async (modelsDir) => {
    server.serve('/fast/tiny.gguf', MODEL);
    const reports: DownloadProgress[] = [];
    await downloadModel(options(modelsDir, '/fast/tiny.gguf', { progressIntervalMs: 60_000, onProgress: (progress) => reports.push(progress) }));
    assert.equal(reports.length, 1, 'one report');
    assert.equal(reports[0]!.downloadedBytes, MODEL.length);
    assert.equal(reports[0]!.totalBytes, MODEL.length);
    assert.ok(reports[0]!.bytesPerSecond > 0);
  }, 'pull-progress-fast'));

  test('bytes that arrived are reported though no more come: once the interval is up, and before a failure', () => withDataDir(async (modelsDir) => {
    const path = '/stalled/tiny.gguf';
    server.serve(path, MODEL);
    // A server that sends a part at once, then nothing: the report comes when the interval is up.
    server.behaveOnce(path, { stallAfterBytes: 100_000 });
    const stalled: Array<{ at: number; progress: DownloadProgress }> = [];
    const started = performance.now();
    const stall = await downloadModel(options(modelsDir, path, {
      progressIntervalMs: 300, idleTimeoutMs: 3_000,
      onProgress: (progress) => stalled.push({ at: performance.now() - started, progress }),
    })).catch((error: unknown) => error);
    assert.ok(stall instanceof DownloadError && stall.reason === 'timeout', String(stall));
    assert.equal(stalled.length, 1, 'one report of the bytes that came');
    assert.equal(stalled[0]!.progress.downloadedBytes, 100_000);
    assert.ok(stalled[0]!.at < 2_500, `reported while the server was silent, at ${Math.round(stalled[0]!.at)} ms`);
    // A connection lost before the interval was up: reported before the failure is.
    rmSync(partialPathOf(modelsDir, 'tiny'), { force: true });
    server.behaveOnce(path, { dropAfterBytes: 50_000 });
    const dropped: DownloadProgress[] = [];
    const drop = await downloadModel(options(modelsDir, path, { progressIntervalMs: 60_000, onProgress: (progress) => dropped.push(progress) }))
      .catch((error: unknown) => error);
    assert.ok(drop instanceof DownloadError && drop.reason === 'connection_lost', String(drop));
    assert.deepEqual(dropped.map((progress) => progress.downloadedBytes), [50_000]);
  }, 'pull-progress-stalled'));

  test('an abort stops within a second and keeps the partial file', () => withDataDir(async (modelsDir) => {
    server.serve('/abort/tiny.gguf', MODEL);
    const { error, abortToReject } = await abortHalfway(modelsDir, '/abort/tiny.gguf');
    assert.ok(abortToReject < 1000, `stopped ${abortToReject} ms after the abort`);
    const partial = readFileSync(partialPathOf(modelsDir, 'tiny'));
    assert.equal(error.partialBytes, partial.length);
    assert.ok(partial.length >= HALF && partial.length < MODEL.length, `about half is on disk (${partial.length} of ${MODEL.length})`);
    assert.ok(partial.equals(MODEL.subarray(0, partial.length)), 'the partial file is a prefix of the file');
    assert.ok(!existsSync(modelPathOf(modelsDir, 'tiny')));
  }, 'pull-abort'));

  test('resume after an abort at half: Range and If-Range, only the rest is sent, the digest is the whole file\'s', () => withDataDir(async (modelsDir) => {
    const path = '/resume/tiny.gguf';
    server.serve(path, MODEL);
    const { error, state } = await abortHalfway(modelsDir, path);
    const onDisk = error.partialBytes;
    const result = await downloadModel(options(modelsDir, path, { resume: state }));
    const resumed = server.requestsTo(path).at(-1)!;
    assert.equal(resumed.range, `bytes=${onDisk}-`);
    assert.equal(resumed.ifRange, state.etag);
    assert.equal(resumed.status, 206);
    assert.equal(resumed.bodyBytesSent, MODEL.length - onDisk, 'the server sent only the rest');
    assert.equal(result.digest, sha256Digest(MODEL));
    assert.deepEqual([result.resumedFromBytes, result.transferredBytes], [onDisk, MODEL.length - onDisk]);
    assert.ok(readFileSync(result.path).equals(MODEL));
  }, 'pull-resume'));

  test('a partial file longer than the file it is part of is no prefix of it: the resume starts over without a range', () => withDataDir(async (modelsDir) => {
    const path = '/longer/tiny.gguf';
    server.serve(path, MODEL);
    const { state } = await abortHalfway(modelsDir, path);
    appendFileSync(partialPathOf(modelsDir, 'tiny'), Buffer.alloc(MODEL.length, 1)); // written by something else meanwhile
    const before = server.requestsTo(path).length;
    const result = await downloadModel(options(modelsDir, path, { resume: state }));
    const requests = server.requestsTo(path).slice(before);
    assert.deepEqual(requests.map((request) => request.range), [null], 'one request, for the whole file: none for a range past its end');
    assert.equal(result.digest, sha256Digest(MODEL));
    assert.equal(result.resumedFromBytes, 0);
  }, 'pull-longer'));

  test('a resume of a file that changed on the server (If-Range fails) starts over from byte 0', () => withDataDir(async (modelsDir) => {
    const path = '/changed/tiny.gguf';
    server.serve(path, MODEL);
    const { state } = await abortHalfway(modelsDir, path);
    const changed = Buffer.from(MODEL);
    changed[changed.length - 1] ^= 0xff;
    server.serve(path, changed, { etag: '"changed"' });
    const result = await downloadModel(options(modelsDir, path, { resume: state }));
    const resumed = server.requestsTo(path).at(-1)!;
    assert.equal(resumed.ifRange, state.etag);
    assert.equal(resumed.status, 200, 'the server sent the whole new file');
    assert.equal(result.digest, sha256Digest(changed));
    assert.equal(result.resumedFromBytes, 0);
  }, 'pull-changed'));

  test('a server that ignores ranges (200 to a Range) restarts the file from byte 0', () => withDataDir(async (modelsDir) => {
    const path = '/norange/tiny.gguf';
    server.serve(path, MODEL);
    const { state } = await abortHalfway(modelsDir, path);
    server.behaveOnce(path, { ignoreRange: true });
    const result = await downloadModel(options(modelsDir, path, { resume: state }));
    assert.equal(server.requestsTo(path).at(-1)!.status, 200);
    assert.equal(result.digest, sha256Digest(MODEL));
    assert.deepEqual([result.resumedFromBytes, result.transferredBytes], [0, MODEL.length]);
  }, 'pull-norange'));

  test('a 206 from another offset, or with another total, is dropped and the file asked for whole', () => withDataDir(async (modelsDir) => {
    for (const [index, behaviour] of [{ rangeStartOverride: 0 }, { contentRangeTotal: MODEL.length + 10 }].entries()) {
      const path = `/badrange${index}/tiny.gguf`;
      server.serve(path, MODEL);
      const { state } = await abortHalfway(modelsDir, path);
      server.behaveOnce(path, behaviour);
      const result = await downloadModel(options(modelsDir, path, { resume: state }));
      const [ranged, plain] = server.requestsTo(path).slice(-2);
      assert.match(ranged!.range ?? '', /^bytes=\d+-$/);
      assert.equal(plain!.range, null, 'then a plain GET');
      assert.equal(result.digest, sha256Digest(MODEL));
      rmSync(result.path);
    }
  }, 'pull-badrange'));

  test('a file that changed between attempts is asked for whole, whatever validators the server gives', () => withDataDir(async (modelsDir) => {
    // The same size, other bytes past the half that the first attempt wrote.
    const changed = Buffer.from(MODEL);
    for (let at = MODEL.length - 1000; at < MODEL.length; at += 1) changed[at] = changed[at]! ^ 0xff;
    const cases: { name: string; before: { etag?: string | null; lastModified?: string | null }; after: { etag?: string | null; lastModified?: string | null } }[] = [
      // A weak ETag is never sent as If-Range: a server that honours If-Range answers 206 all the same.
      { name: 'weak', before: { etag: 'W/"a"' }, after: { etag: 'W/"b"' } },
      // If-Range sent, and ignored by the server; only its Last-Modified says the file changed.
      { name: 'dated', before: { etag: null, lastModified: 'Tue, 01 Oct 2024 10:00:00 GMT' }, after: { etag: null, lastModified: 'Wed, 02 Oct 2024 10:00:00 GMT' } },
      { name: 'vanished', before: { etag: '"v1"' }, after: { etag: null } },
      // Bytes that came with no validator, continued by an answer that has one.
      { name: 'appeared', before: { etag: null }, after: { etag: '"b"' } },
      { name: 'appeared-dated', before: { etag: null }, after: { etag: null, lastModified: 'Wed, 02 Oct 2024 10:00:00 GMT' } },
      // No validator before or after: nothing shows the file is the same.
      { name: 'none', before: { etag: null }, after: { etag: null } },
    ];
    for (const { name, before, after } of cases) {
      const path = `/changed-${name}/tiny.gguf`;
      server.serve(path, MODEL, before);
      const { state } = await abortHalfway(modelsDir, path);
      server.serve(path, changed, after);
      server.behave(path, { ignoreIfRange: true });
      const result = await downloadModel(options(modelsDir, path, { resume: state }));
      const [ranged, plain] = server.requestsTo(path).slice(-2);
      assert.equal(ranged!.status, 206, `${name}: the range was answered`);
      assert.equal(plain!.range, null, `${name}: then a plain GET`);
      assert.equal(result.digest, sha256Digest(changed), `${name}: the digest is the new file's, not a mix of both`);
      assert.ok(readFileSync(result.path).equals(changed), name);
      rmSync(result.path);
    }
  }, 'pull-changed'));

  test('a partial file that is already whole is confirmed by a 416 and moved into place without a body', () => withDataDir(async (modelsDir) => {
    const path = '/whole/tiny.gguf';
    const url = server.serve(path, MODEL, { etag: '"whole"' });
    writeFileSync(partialPathOf(modelsDir, 'tiny'), MODEL);
    const result = await downloadModel(options(modelsDir, path, { resume: { url, etag: '"whole"', lastModified: null, totalBytes: MODEL.length } }));
    const request = server.requestsTo(path).at(-1)!;
    assert.equal(request.range, `bytes=${MODEL.length}-`);
    assert.equal(request.status, 416);
    assert.equal(result.digest, sha256Digest(MODEL));
    assert.deepEqual([result.resumedFromBytes, result.transferredBytes], [MODEL.length, 0]);
  }, 'pull-whole'));

  test('a server that answers open ranges with less than the rest is asked again until the file is whole', () => withDataDir(async (modelsDir) => {
    const path = '/capped/tiny.gguf';
    server.serve(path, MODEL);
    server.behave(path, { maxRangeBytes: 100_000 });
    server.behaveOnce(path, { dropAfterBytes: 50_000 });
    const first = await downloadModel(options(modelsDir, path)).catch((error: unknown) => error);
    assert.ok(first instanceof DownloadError && first.reason === 'connection_lost' && first.resumable, String(first));
    const result = await downloadModel(options(modelsDir, path));
    const ranges = server.requestsTo(path).slice(1).map((request) => request.range);
    assert.deepEqual(ranges, Array.from({ length: Math.ceil((MODEL.length - 50_000) / 100_000) }, (_, i) => `bytes=${50_000 + i * 100_000}-`));
    assert.equal(result.digest, sha256Digest(MODEL));
    assert.equal(result.resumedFromBytes, 50_000);
  }, 'pull-capped'));

  test('a partial file that does not start with the GGUF magic is not continued', () => withDataDir(async (modelsDir) => {
    const path = '/garbage/tiny.gguf';
    server.serve(path, MODEL);
    writeFileSync(partialPathOf(modelsDir, 'tiny'), '<html>not a model</html>');
    const result = await downloadModel(options(modelsDir, path));
    assert.deepEqual(server.requestsTo(path).map((request) => request.range), ['bytes=24-', null]);
    assert.equal(result.digest, sha256Digest(MODEL));
  }, 'pull-garbage'));

  test('the resume state is recorded before any byte is written: a failure to record stops the download', () => withDataDir(async (modelsDir) => {
    const path = '/record/tiny.gguf';
    server.serve(path, MODEL);
    const storageDown = new Error('the database cannot be written');
    const error = await downloadModel(options(modelsDir, path, {
      onResumeState: async () => {
        await new Promise((resolve) => setImmediate(resolve));
        assert.ok(!existsSync(partialPathOf(modelsDir, 'tiny')), 'nothing is on disk while the state is being recorded');
        throw storageDown;
      },
    })).catch((caught: unknown) => caught);
    assert.equal(error, storageDown, "the caller's own error comes back as it was");
    assert.ok(!existsSync(partialPathOf(modelsDir, 'tiny')) && !existsSync(modelPathOf(modelsDir, 'tiny')));
  }, 'pull-record'));

  test('an error thrown by the progress callback ends the download with that error, not the process', () => withDataDir(async (modelsDir) => {
    const path = '/progress-throws/tiny.gguf';
    server.serve(path, MODEL);
    server.behaveOnce(path, { bytesPerSecond: 1_000_000 });
    const broken = new Error('the progress bar broke');
    const error = await downloadModel(options(modelsDir, path, { progressIntervalMs: 0, onProgress: () => { throw broken; } })).catch((caught: unknown) => caught);
    assert.equal(error, broken);
    assert.equal(server.requestsTo(path)[0]!.completed, false, 'the transfer was stopped');
    assert.ok(!existsSync(modelPathOf(modelsDir, 'tiny')));
  }, 'pull-progress-throws'));

  test('a resume record of another URL is not used: the download starts over', () => withDataDir(async (modelsDir) => {
    const path = '/other/tiny.gguf';
    server.serve(path, MODEL);
    writeFileSync(partialPathOf(modelsDir, 'tiny'), MODEL.subarray(0, 1000));
    const result = await downloadModel(options(modelsDir, path, { resume: { url: `${server.url}/elsewhere.gguf`, etag: '"x"', lastModified: null, totalBytes: 5 } }));
    assert.deepEqual(server.requestsTo(path).map((request) => request.range), [null]);
    assert.equal(result.digest, sha256Digest(MODEL));
  }, 'pull-other-url'));
});
