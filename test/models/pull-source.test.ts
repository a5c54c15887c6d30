import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServiceError } from '../../src/domain/errors.js';
import { ConfigError } from '../../src/config.js';
import {
  DEFAULT_HF_ENDPOINT, modelIdFromSource, parseExpectedDigest, parsePullSource, pullSettingsFromEnvironment, type PullSettings,
} from '../../src/models/pull-source.js';

const HF: PullSettings = { hfEndpoint: DEFAULT_HF_ENDPOINT, hfToken: null };
const MIRROR: PullSettings = { hfEndpoint: 'http://127.0.0.1:8080/mirror', hfToken: null };

function refused(text: unknown, pattern: RegExp, settings = HF): void {
  assert.throws(() => parsePullSource(text, settings), (error: unknown) => {
    assert.ok(error instanceof ServiceError, `a ServiceError for ${String(text)}`);
    assert.equal(error.code, 'invalid_request');
    assert.equal(error.param, 'source');
    assert.match(error.message, pattern);
    return true;
  });
}

describe('pull sources (LMSP 5.1)', () => {
  test('hf:OWNER/REPO/FILE.gguf resolves to <endpoint>/OWNER/REPO/resolve/main/FILE.gguf', () => {
    const source = parsePullSource('hf:bartowski/Llama-3.2-1B-Instruct-GGUF/Llama-3.2-1B-Instruct-Q4_K_M.gguf', HF);
    assert.equal(source.kind, 'hf');
    assert.equal(source.url, 'https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/Llama-3.2-1B-Instruct-Q4_K_M.gguf');
    assert.deepEqual(source.hf, { owner: 'bartowski', repo: 'Llama-3.2-1B-Instruct-GGUF', file: 'Llama-3.2-1B-Instruct-Q4_K_M.gguf', revision: 'main' });
    assert.equal(source.fileName, 'Llama-3.2-1B-Instruct-Q4_K_M.gguf');
  });

  test('hf: sources take a revision after @, and files in sub-folders', () => {
    const source = parsePullSource('hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/q4/qwen2.5-0.5b-instruct-q4_k_m.gguf@v1.2', HF);
    assert.equal(source.url, 'https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/v1.2/q4/qwen2.5-0.5b-instruct-q4_k_m.gguf');
    assert.equal(source.hf?.file, 'q4/qwen2.5-0.5b-instruct-q4_k_m.gguf');
    assert.equal(source.fileName, 'qwen2.5-0.5b-instruct-q4_k_m.gguf');
    const commit = parsePullSource('hf:a/b/c.gguf@0123456789abcdef0123456789abcdef01234567', HF);
    assert.equal(commit.hf?.revision, '0123456789abcdef0123456789abcdef01234567');
  });

  test('a revision with slashes is one encoded path segment', () => {
    const source = parsePullSource('hf:a/b/c.gguf@refs/pr/1', HF);
    assert.equal(source.url, 'https://huggingface.co/a/b/resolve/refs%2Fpr%2F1/c.gguf');
  });

  test('LMSP_HF_ENDPOINT replaces the endpoint, path prefix included', () => {
    const source = parsePullSource('hf:a/b/c.gguf', MIRROR);
    assert.equal(source.url, 'http://127.0.0.1:8080/mirror/a/b/resolve/main/c.gguf');
  });

  test('owner and repository names follow the Hub rules', () => {
    refused('hf:-a/b/c.gguf', /owner name '-a'/);
    refused('hf:a/b-/c.gguf', /repository name 'b-'/);
    refused('hf:a--b/c/d.gguf', /owner name/);
    refused('hf:a/b..c/d.gguf', /repository name/);
    refused('hf:a/b.git/c.gguf', /\.git/);
    refused(`hf:${'a'.repeat(97)}/b/c.gguf`, /owner name/);
    refused('hf:a/b%2F/c.gguf', /repository name/);
    refused('hf:a/c.gguf', /expected hf:OWNER\/REPO\/FILE\.gguf/);
  });

  test('file paths: no . or .. segments, no empty segments, must be .gguf', () => {
    refused('hf:a/b/../c.gguf', /'\.' or '\.\.'/);
    refused('hf:a/b/x/./c.gguf', /'\.' or '\.\.'/);
    refused('hf:a/b/x//c.gguf', /empty segment/);
    refused('hf:a/b/c.gguf/', /empty segment/);
    refused('hf:a/b/c.bin', /\.gguf file/);
    refused('hf:a/b/c.gguf%00', /segment/);
    refused('hf:a/b/c?.gguf', /segment/);
    refused('hf:a/b/c#x.gguf', /segment/);
    assert.equal(parsePullSource('hf:a/b/MODEL.GGUF', HF).fileName, 'MODEL.GGUF');
  });

  test('revisions: not empty, no .. or leading dots, at most one @', () => {
    refused('hf:a/b/c.gguf@', /revision after '@' is empty/);
    refused('hf:a/b/c.gguf@../main', /not a valid branch/);
    refused('hf:a/b/c.gguf@.hidden', /not a valid branch/);
    refused('hf:a/b/c.gguf@main.lock', /not a valid branch/);
    refused('hf:a/b/c.gguf@-x', /not a valid branch/);
    refused('hf:a/b/c.gguf@x@y', /at most one '@'/);
    refused('hf:a/b/c.gguf@ma in', /visible ASCII/);
  });

  test('https URLs of GGUF files are accepted; the fragment is dropped, the query kept', () => {
    const source = parsePullSource('https://example.com/models/tiny.gguf?download=true#readme', HF);
    assert.equal(source.kind, 'url');
    assert.equal(source.url, 'https://example.com/models/tiny.gguf?download=true');
    assert.equal(source.fileName, 'tiny.gguf');
    assert.equal(source.hf, null);
  });

  test('other schemes, and plain http except to the configured endpoint, are refused', () => {
    refused('file:///etc/passwd.gguf', /scheme 'file:'/);
    refused('ftp://example.com/a.gguf', /scheme 'ftp:'/);
    refused('http://example.com/a.gguf', /scheme 'http:'/);
    refused('http://huggingface.co/a/b/resolve/main/c.gguf', /scheme 'http:'/);
    refused('javascript:alert(1)', /scheme 'javascript:'/);
    refused('/tmp/model.gguf', /without a scheme/);
    refused('example.com/a.gguf', /without a scheme/);
    const mirrored = parsePullSource('http://127.0.0.1:8080/files/a.gguf', MIRROR);
    assert.equal(mirrored.url, 'http://127.0.0.1:8080/files/a.gguf');
    refused('http://127.0.0.1:8081/files/a.gguf', /scheme 'http:'/, MIRROR);
  });

  test('credentials in URLs are refused', () => {
    refused('https://user:secret@example.com/a.gguf', /credentials/);
    refused('https://user@example.com/a.gguf', /credentials/);
  });

  test('a URL must name a .gguf file', () => {
    refused('https://example.com/a.bin', /must name a \.gguf file/);
    refused('https://example.com/', /must name a \.gguf file/);
    refused('https://example.com/.gguf', /must name a \.gguf file/);
    refused('https://example.com/a.gguf/', /must name a \.gguf file/);
    refused('https://example.com/%E0%A4%A.gguf', /percent-encoding/);
  });

  test('malformed input of any type gets invalid_request naming source', () => {
    refused(undefined, /non-empty string/);
    refused(42, /non-empty string/);
    refused('', /non-empty string/);
    refused(`https://example.com/${'a'.repeat(2100)}.gguf`, /longer than 2048/);
    refused('hf:a/b/c.gguf\n', /visible ASCII/);
    refused('hf:a/b/modèle.gguf', /visible ASCII/);
    refused('https://exa mple.com/a.gguf', /visible ASCII/);
    refused('https://[::1/a.gguf', /not a valid URL/);
  });

  test('the default model id comes from the file name, as for lmsp models add', () => {
    assert.equal(modelIdFromSource(parsePullSource('hf:a/b/sub/Llama-3.2-1B.Q4_K_M.gguf', HF)), 'llama-3.2-1b.q4_k_m');
    assert.equal(modelIdFromSource(parsePullSource('https://example.com/x/Tiny%20Model.gguf', HF)), 'tiny-model');
  });

  test('expected digests are sha256: and 64 hex digits, normalised to lower case', () => {
    const hex = 'AB'.repeat(32);
    assert.equal(parseExpectedDigest(`sha256:${hex}`), `sha256:${hex.toLowerCase()}`);
    for (const bad of ['sha256:abc', `sha512:${'ab'.repeat(32)}`, 'ab'.repeat(32), 7, null]) {
      assert.throws(() => parseExpectedDigest(bad), (error: unknown) => error instanceof ServiceError && error.param === 'digest');
    }
  });
});

describe('pull settings from the environment (LMSP 5.1)', () => {
  test('defaults to huggingface.co and no token', () => {
    assert.deepEqual(pullSettingsFromEnvironment({}), { hfEndpoint: 'https://huggingface.co', hfToken: null, idleTimeoutMs: 30_000 });
  });

  test('LMSP_HF_ENDPOINT and HF_TOKEN are read; a trailing slash is dropped', () => {
    assert.deepEqual(pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: 'https://hf-mirror.example/prefix/', HF_TOKEN: 'hf_abc' }), {
      hfEndpoint: 'https://hf-mirror.example/prefix', hfToken: 'hf_abc', idleTimeoutMs: 30_000,
    });
  });

  test('LMSP_PULL_IDLE_TIMEOUT is a duration from 1 ms to 1 h; anything else is a configuration error', () => {
    assert.equal(pullSettingsFromEnvironment({ LMSP_PULL_IDLE_TIMEOUT: '500ms' }).idleTimeoutMs, 500);
    assert.equal(pullSettingsFromEnvironment({ LMSP_PULL_IDLE_TIMEOUT: '2m' }).idleTimeoutMs, 120_000);
    for (const text of ['soon', '0s', '-1s', '2h', 'forever', '30']) {
      assert.throws(() => pullSettingsFromEnvironment({ LMSP_PULL_IDLE_TIMEOUT: text }), ConfigError, text);
    }
  });

  test('a malformed endpoint is a configuration error', () => {
    for (const endpoint of ['not a url', 'ftp://x.example', 'https://u:p@x.example', 'https://x.example/?q=1']) {
      assert.throws(() => pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: endpoint }), ConfigError, endpoint);
    }
  });
});
