import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DownloadError } from '../../src/models/download-errors.js';
import { isRedirectAllowed } from '../../src/models/download-http.js';
import { downloadModel } from '../../src/models/download.js';
import { parsePullSource, pullSettingsFromEnvironment, type PullSource } from '../../src/models/pull-source.js';
import { withDataDir } from '../helpers/data-dir.js';
import { sha256Digest, startModelServer, tinyModelBytes, type ModelServer } from '../helpers/model-server.js';

const MODEL = tinyModelBytes();
const TOKEN = 'hf_test_token_0123456789';

/** `endpoint` plays the Hugging Face endpoint; `cdn` is another origin it redirects to. */
let endpoint: ModelServer;
let cdn: ModelServer;
before(async () => {
  endpoint = await startModelServer();
  cdn = await startModelServer();
});
after(async () => {
  await endpoint.close();
  await cdn.close();
});

function settings() {
  return pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: endpoint.url, HF_TOKEN: TOKEN });
}

describe('HF_TOKEN goes to the endpoint only (LMSP 5.1)', () => {
  test('an hf: source sends Authorization: Bearer <HF_TOKEN> to the endpoint', () => withDataDir(async (modelsDir) => {
    const source = endpoint.serveHf({ owner: 'org', repo: 'direct', file: 'tiny.gguf' }, MODEL);
    const result = await downloadModel({ source: parsePullSource(source, settings()), settings: settings(), modelsDir, id: 'tiny' });
    assert.equal(result.digest, sha256Digest(MODEL));
    assert.equal(endpoint.requestsTo('/org/direct/resolve/main/tiny.gguf')[0]!.authorization, `Bearer ${TOKEN}`);
  }, 'pull-token'));

  test('the token is not forwarded when the endpoint redirects to another origin (a CDN)', () => withDataDir(async (modelsDir) => {
    const cdnUrl = cdn.serve('/blobs/sha256-tiny', MODEL);
    const source = endpoint.serveHf({ owner: 'org', repo: 'cdn', file: 'tiny.gguf' }, Buffer.alloc(0));
    endpoint.behave('/org/cdn/resolve/main/tiny.gguf', { redirectTo: `${cdnUrl}?X-Amz-Signature=secret` });
    const result = await downloadModel({ source: parsePullSource(source, settings()), settings: settings(), modelsDir, id: 'tiny' });
    assert.equal(result.digest, sha256Digest(MODEL));
    assert.equal(endpoint.requestsTo('/org/cdn/resolve/main/tiny.gguf')[0]!.authorization, `Bearer ${TOKEN}`);
    const [fetched] = cdn.requestsTo('/blobs/sha256-tiny');
    assert.equal(fetched!.authorization, null, 'the CDN never sees the token');
  }, 'pull-token-cdn'));

  test('once a redirect has left the endpoint, the token stays behind even when it comes back', () => withDataDir(async (modelsDir) => {
    const back = endpoint.serve('/back/tiny.gguf', MODEL);
    cdn.serve('/bounce', Buffer.alloc(0));
    cdn.behave('/bounce', { redirectTo: back });
    const source = endpoint.serveHf({ owner: 'org', repo: 'bounce', file: 'tiny.gguf' }, Buffer.alloc(0));
    endpoint.behave('/org/bounce/resolve/main/tiny.gguf', { redirectTo: `${cdn.url}/bounce` });
    await downloadModel({ source: parsePullSource(source, settings()), settings: settings(), modelsDir, id: 'tiny' });
    assert.equal(cdn.requestsTo('/bounce')[0]!.authorization, null);
    assert.equal(endpoint.requestsTo('/back/tiny.gguf')[0]!.authorization, null);
  }, 'pull-token-bounce'));

  test('a URL on another host never gets the token', () => withDataDir(async (modelsDir) => {
    const url = cdn.serve('/elsewhere/tiny.gguf', MODEL);
    const source: PullSource = { kind: 'url', url, fileName: 'tiny.gguf', hf: null };
    await downloadModel({ source, settings: settings(), modelsDir, id: 'tiny' });
    assert.equal(cdn.requestsTo('/elsewhere/tiny.gguf')[0]!.authorization, null);
  }, 'pull-token-other-host'));

  test('a resume through a redirect carries Range and If-Range to the CDN, without the token', () => withDataDir(async (modelsDir) => {
    const cdnUrl = cdn.serve('/blobs/resume', MODEL, { etag: '"blob"' });
    cdn.behaveOnce('/blobs/resume', { dropAfterBytes: 100_000 });
    const source = endpoint.serveHf({ owner: 'org', repo: 'resume', file: 'tiny.gguf' }, Buffer.alloc(0));
    endpoint.behave('/org/resume/resolve/main/tiny.gguf', { redirectTo: cdnUrl });
    const parsed = parsePullSource(source, settings());
    let recorded = null;
    const first = await downloadModel({ source: parsed, settings: settings(), modelsDir, id: 'tiny', onResumeState: (state) => void (recorded = state) }).catch((error: unknown) => error);
    assert.ok(first instanceof DownloadError && first.resumable);
    assert.deepEqual(recorded, { url: parsed.url, etag: '"blob"', lastModified: null, totalBytes: MODEL.length, seen: { etag: '"blob"', lastModified: null } });
    const result = await downloadModel({ source: parsed, settings: settings(), modelsDir, id: 'tiny', resume: recorded });
    const resumed = cdn.requestsTo('/blobs/resume').at(-1)!;
    assert.deepEqual([resumed.range, resumed.ifRange, resumed.authorization, resumed.status], ['bytes=100000-', '"blob"', null, 206]);
    assert.equal(result.digest, sha256Digest(MODEL));
  }, 'pull-token-resume'));
});

describe('redirects', () => {
  test('a redirect loop ends with too_many_redirects', () => withDataDir(async (modelsDir) => {
    const url = endpoint.serve('/loop/tiny.gguf', MODEL);
    endpoint.behave('/loop/tiny.gguf', { redirectTo: url });
    const error = await downloadModel({ source: parsePullSource(url, settings()), settings: settings(), modelsDir, id: 'tiny' }).catch((caught: unknown) => caught);
    assert.ok(error instanceof DownloadError);
    assert.equal(error.reason, 'too_many_redirects');
    assert.equal(error.resumable, false);
    assert.equal(endpoint.requestsTo('/loop/tiny.gguf').length, 11, 'the first request and 10 redirects');
  }, 'pull-loop'));

  test('https may redirect to https only; plain http only to plain http', () => {
    const https = new URL('https://huggingface.co/a');
    const http = new URL('http://127.0.0.1:1/a');
    assert.equal(isRedirectAllowed(https, new URL('https://cdn.example/b')), true);
    assert.equal(isRedirectAllowed(https, new URL('http://cdn.example/b')), false);
    assert.equal(isRedirectAllowed(http, new URL('http://127.0.0.1:2/b')), true);
    assert.equal(isRedirectAllowed(http, new URL('https://cdn.example/b')), true);
    assert.equal(isRedirectAllowed(https, new URL('file:///etc/passwd')), false);
    assert.equal(isRedirectAllowed(http, new URL('ftp://x/b')), false);
  });
});
