/**
 * Task error messages shown to clients (LMSP 5): file-system paths are hidden, the URL a pull
 * was asked to fetch is not.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { withoutPaths } from '../../src/tasks/scheduler.js';

describe('withoutPaths', () => {
  test('keeps http(s) URLs whole, so a failed pull says what it could not fetch', () => {
    assert.equal(withoutPaths('could not fetch https://example.com/models/a.gguf: ENOTFOUND'),
      'could not fetch https://example.com/models/a.gguf: ENOTFOUND');
    assert.equal(withoutPaths('HTTP 404 from https://hf.example/o/r/resolve/main/f.gguf'), 'HTTP 404 from https://hf.example/o/r/resolve/main/f.gguf');
    assert.equal(withoutPaths('could not fetch http://127.0.0.1:8080/o/r/resolve/main/f.gguf: ECONNREFUSED'),
      'could not fetch http://127.0.0.1:8080/o/r/resolve/main/f.gguf: ECONNREFUSED');
  });

  test('still hides paths, beside a URL and in file: URLs', () => {
    assert.equal(withoutPaths('https://example.com/a.gguf -> /home/a/models/a.gguf.partial: ENOSPC'), 'https://example.com/a.gguf -> <file>: ENOSPC');
    assert.doesNotMatch(withoutPaths('cannot open file:///home/a/models/x.gguf'), /home|x\.gguf/);
  });

  test('words joined by slashes are no path: a chat template\'s message stays readable', () => {
    assert.equal(withoutPaths('Conversation roles must alternate user/assistant/user/assistant/...'),
      'Conversation roles must alternate user/assistant/user/assistant/...');
    assert.equal(withoutPaths("ENOENT: no such file or directory, open '/home/a/models/b.gguf'"), "ENOENT: no such file or directory, open '<file>'");
    assert.equal(withoutPaths('failed to load C:\\models\\b.gguf (bad magic)'), 'failed to load <file> (bad magic)');
  });
});
