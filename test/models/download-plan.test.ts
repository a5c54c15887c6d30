import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DownloadError } from '../../src/models/download-errors.js';
import { parseContentRange, parseUnsatisfiedRange, type ResponseHeaders } from '../../src/models/download-http.js';
import { ifRangeOf, planBody, resumeStateOf, type Answer, type ResumeState } from '../../src/models/download-plan.js';

const URL_ = new URL('https://cdn.example/file.gguf?signature=secret');
const RECORDED: ResumeState = { url: 'https://example.com/file.gguf', etag: '"v1"', lastModified: null, totalBytes: 1000 };

function answer(status: number, headers: ResponseHeaders, requestedFrom = 0, recorded: ResumeState | null = null): Answer {
  return { requestedFrom, recorded, status, statusMessage: '', headers, url: URL_ };
}

function failsWith(run: () => unknown, reason: string, resumable = false): DownloadError {
  let caught: unknown;
  assert.throws(run, (error: unknown) => {
    caught = error;
    return error instanceof DownloadError;
  });
  const error = caught as DownloadError;
  assert.equal(error.reason, reason);
  assert.equal(error.resumable, resumable);
  assert.doesNotMatch(error.message, /secret/, 'messages never carry a signed query');
  return error;
}

describe('Content-Range parsing (RFC 9110 14.4)', () => {
  test('well-formed ranges, an unknown total, and what is refused', () => {
    assert.deepEqual(parseContentRange('bytes 0-99/100'), { start: 0, end: 99, total: 100 });
    assert.deepEqual(parseContentRange('bytes 500-999/*'), { start: 500, end: 999, total: null });
    for (const bad of [undefined, '', 'bytes 10-5/100', 'bytes 0-100/100', 'bytes */100', 'items 0-9/10', 'bytes 0-9/1e3', 'bytes 0-99999999999999999999/*']) {
      assert.equal(parseContentRange(bad), null, String(bad));
    }
    assert.equal(parseUnsatisfiedRange('bytes */1000'), 1000);
    assert.equal(parseUnsatisfiedRange('bytes 0-9/10'), null);
  });
});

describe('what an answer means for the partial file (LMSP 5.1)', () => {
  test('200: the whole file from byte 0, even when a range was asked (the server ignores ranges or the file changed)', () => {
    assert.deepEqual(planBody(answer(200, { 'content-length': '1000' })), { kind: 'write', from: 0, bodyBytes: 1000, totalBytes: 1000 });
    assert.deepEqual(planBody(answer(200, { 'content-length': '1200' }, 400, RECORDED)), { kind: 'write', from: 0, bodyBytes: 1200, totalBytes: 1200 });
    assert.deepEqual(planBody(answer(200, {})), { kind: 'write', from: 0, bodyBytes: null, totalBytes: null });
  });

  test('206 from the asked offset continues the file', () => {
    const plan = planBody(answer(206, { 'content-range': 'bytes 400-999/1000', 'content-length': '600', etag: '"v1"' }, 400, RECORDED));
    assert.deepEqual(plan, { kind: 'write', from: 400, bodyBytes: 600, totalBytes: 1000 });
  });

  test('206 from another offset, with another ETag or another total starts over', () => {
    assert.equal(planBody(answer(206, { 'content-range': 'bytes 0-999/1000' }, 400, RECORDED)).kind, 'restart');
    assert.equal(planBody(answer(206, { 'content-range': 'bytes 400-999/1000', etag: '"v2"' }, 400, RECORDED)).kind, 'restart');
    assert.equal(planBody(answer(206, { 'content-range': 'bytes 400-1199/1200' }, 400, RECORDED)).kind, 'restart');
    assert.equal(planBody(answer(206, {}, 400, RECORDED)).kind, 'restart');
  });

  test('206 whose validators are not those the bytes on disk came under starts over, weak ones included', () => {
    const range = { 'content-range': 'bytes 400-999/1000' };
    const under = (headers: ResponseHeaders) => resumeStateOf('https://example.com/file.gguf', headers, 1000);
    // A weak ETag is never sent as If-Range, so even a server that honours If-Range answers 206.
    const weak = under({ etag: 'W/"a"' });
    assert.equal(planBody(answer(206, { ...range, etag: 'W/"a"' }, 400, weak)).kind, 'write');
    assert.deepEqual(planBody(answer(206, { ...range, etag: 'W/"b"' }, 400, weak)), { kind: 'restart', why: 'the file changed on the server (another ETag)' });
    assert.equal(planBody(answer(206, range, 400, weak)).kind, 'restart');
    // A server that ignores If-Range: the Last-Modified it answers with says the file changed.
    const dated = under({ 'last-modified': 'Tue, 01 Oct 2024 10:00:00 GMT', date: 'Tue, 01 Oct 2024 10:00:05 GMT' });
    assert.equal(planBody(answer(206, { ...range, 'last-modified': 'Tue, 01 Oct 2024 10:00:00 GMT' }, 400, dated)).kind, 'write');
    assert.deepEqual(planBody(answer(206, { ...range, 'last-modified': 'Wed, 02 Oct 2024 10:00:00 GMT' }, 400, dated)),
      { kind: 'restart', why: 'the file changed on the server (another Last-Modified)' });
    // A Last-Modified too recent to be strong is still compared.
    const recent = under({ 'last-modified': 'Tue, 01 Oct 2024 10:00:00 GMT' });
    assert.equal(planBody(answer(206, { ...range, 'last-modified': 'Wed, 02 Oct 2024 10:00:00 GMT' }, 400, recent)).kind, 'restart');
    // A strong ETag that disappears.
    assert.deepEqual(planBody(answer(206, range, 400, under({ etag: '"v1"' }))), { kind: 'restart', why: 'the file changed on the server (no ETag any more)' });
    // Bytes that came with no validator cannot be shown to be of the same file.
    assert.deepEqual(planBody(answer(206, range, 400, under({}))),
      { kind: 'restart', why: 'the server sent neither ETag nor Last-Modified, so nothing shows the file is the same' });
    // A validator the bytes on disk did not come with: the file may have changed under it.
    assert.deepEqual(planBody(answer(206, { ...range, etag: '"b"' }, 400, dated)), { kind: 'restart', why: 'the file changed on the server (an ETag it did not have)' });
    assert.deepEqual(planBody(answer(206, { ...range, etag: 'W/"a"', 'last-modified': 'Tue, 01 Oct 2024 10:00:00 GMT' }, 400, weak)),
      { kind: 'restart', why: 'the file changed on the server (a Last-Modified it did not have)' });
    // A record written before the answer's own validators were kept compares its strong ones.
    assert.equal(planBody(answer(206, { ...range, etag: '"v2"' }, 400, RECORDED)).kind, 'restart');
    assert.equal(planBody(answer(206, { ...range, etag: '"v1"' }, 400, RECORDED)).kind, 'write');
  });

  test('206 whose Content-Length disagrees with its Content-Range is a lying server', () => {
    const error = failsWith(() => planBody(answer(206, { 'content-range': 'bytes 400-999/1000', 'content-length': '700', etag: '"v1"' }, 400, RECORDED)), 'length_mismatch');
    assert.equal(error.code, 'download_failed');
  });

  test('206 to a request without a range: only a range from 0 is usable', () => {
    assert.deepEqual(planBody(answer(206, { 'content-range': 'bytes 0-999/1000' })), { kind: 'write', from: 0, bodyBytes: 1000, totalBytes: 1000 });
    failsWith(() => planBody(answer(206, { 'content-range': 'bytes 5-999/1000' })), 'length_mismatch');
  });

  test('416 naming the partial size means the partial file is whole; any other 416 starts over', () => {
    assert.deepEqual(planBody(answer(416, { 'content-range': 'bytes */1000' }, 1000, RECORDED)), { kind: 'complete', totalBytes: 1000 });
    assert.equal(planBody(answer(416, { 'content-range': 'bytes */800' }, 1000, RECORDED)).kind, 'restart');
    assert.equal(planBody(answer(416, {}, 1000, RECORDED)).kind, 'restart');
    failsWith(() => planBody(answer(416, {})), 'http_status');
  });

  test('error statuses: 408, 429 and 5xx can be retried, other 4xx are final', () => {
    for (const status of [408, 429, 500, 502, 503]) assert.equal(failsWith(() => planBody(answer(status, {})), 'http_status', true).status, status);
    for (const status of [400, 401, 403, 404, 410, 304]) failsWith(() => planBody(answer(status, {})), 'http_status', false);
  });

  test('a compressed body is refused: sizes and ranges would count compressed bytes', () => {
    failsWith(() => planBody(answer(200, { 'content-encoding': 'gzip', 'content-length': '10' })), 'unsupported_encoding');
    assert.equal(planBody(answer(200, { 'content-encoding': 'identity', 'content-length': '10' })).kind, 'write');
  });
});

describe('resume validators (RFC 9110 13.1.5)', () => {
  test('a strong ETag is kept and sent as If-Range; a weak one is not', () => {
    const state = resumeStateOf('https://x/a.gguf', { etag: '"abc"' }, 10);
    assert.deepEqual(state, { url: 'https://x/a.gguf', etag: '"abc"', lastModified: null, totalBytes: 10, seen: { etag: '"abc"', lastModified: null } });
    assert.equal(ifRangeOf(state), '"abc"');
    assert.equal(resumeStateOf('https://x/a.gguf', { etag: 'W/"abc"' }, 10).etag, null);
  });

  test('Last-Modified is used only when a second older than Date (a strong validator)', () => {
    const strong = resumeStateOf('u', { 'last-modified': 'Tue, 01 Oct 2024 10:00:00 GMT', date: 'Tue, 01 Oct 2024 10:00:05 GMT' }, null);
    assert.equal(ifRangeOf(strong), 'Tue, 01 Oct 2024 10:00:00 GMT');
    const weak = resumeStateOf('u', { 'last-modified': 'Tue, 01 Oct 2024 10:00:00 GMT', date: 'Tue, 01 Oct 2024 10:00:00 GMT' }, null);
    assert.equal(ifRangeOf(weak), null);
    assert.equal(ifRangeOf(null), null);
  });
});
