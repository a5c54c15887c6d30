import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { DownloadError } from '../../src/models/download-errors.js';
import { downloadModel, modelPathOf, partialPathOf, type DownloadOptions } from '../../src/models/download.js';
import { parsePullSource, pullSettingsFromEnvironment } from '../../src/models/pull-source.js';
import { withDataDir } from '../helpers/data-dir.js';
import { sha256Digest, startModelServer, testCertificate, tinyModelBytes, type ModelServer } from '../helpers/model-server.js';

const MODEL = tinyModelBytes();
const HALF = Math.floor(MODEL.length / 2);

let server: ModelServer;
before(async () => {
  server = await startModelServer({ https: true });
});
after(() => server.close());

function options(modelsDir: string, path: string, extra: Partial<DownloadOptions> = {}): DownloadOptions {
  const settings = pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: server.url, HF_TOKEN: 'hf_secret' });
  return { source: parsePullSource(`${server.url}${path}`, settings), settings, modelsDir, id: 'tiny', trustedCertificates: testCertificate().cert, ...extra };
}

describe('model download over https (LMSP 5.1)', () => {
  test('an https pull verifies the certificate, sends the token to the endpoint and resumes with a Range request', () => withDataDir(async (modelsDir) => {
    const source = server.serveHf({ owner: 'o', repo: 'r', file: 'tiny.gguf' }, MODEL);
    const path = '/o/r/resolve/main/tiny.gguf';
    server.behaveOnce(path, { dropAfterBytes: HALF });
    const settings = pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: server.url, HF_TOKEN: 'hf_secret' });
    const hfOptions: DownloadOptions = { ...options(modelsDir, path), source: parsePullSource(source, settings), settings };
    const error = await downloadModel(hfOptions).then(() => assert.fail('the connection was dropped'), (caught: unknown) => caught);
    assert.ok(error instanceof DownloadError && error.reason === 'connection_lost' && error.resumable, String(error));
    assert.equal(readFileSync(partialPathOf(modelsDir, 'tiny')).length, HALF, 'every byte received over TLS is on disk');
    const result = await downloadModel(hfOptions);
    const requests = server.requestsTo(path);
    assert.equal(requests.length, 2);
    assert.equal(requests[1]!.range, `bytes=${HALF}-`);
    assert.ok(requests.every((request) => request.authorization === 'Bearer hf_secret'), 'the token went to the endpoint over TLS');
    assert.equal(result.digest, sha256Digest(MODEL));
    assert.ok(readFileSync(modelPathOf(modelsDir, 'tiny')).equals(MODEL));
  }, 'pull-https'));

  test('a certificate that is not trusted fails at once, final, and leaves nothing', () => withDataDir(async (modelsDir) => {
    server.serve('/untrusted/tiny.gguf', MODEL);
    const error = await downloadModel(options(modelsDir, '/untrusted/tiny.gguf', { trustedCertificates: undefined })).then(
      () => assert.fail('a self-signed certificate is not trusted'),
      (caught: unknown) => caught,
    );
    assert.ok(error instanceof DownloadError, String(error));
    assert.equal(error.reason, 'connection_failed');
    assert.equal(error.resumable, false, 'a TLS failure will not go away by trying again');
    assert.match(error.message, /SELF_SIGNED/);
    assert.equal(server.requestsTo('/untrusted/tiny.gguf').length, 0, 'no request was sent over an untrusted connection');
    assert.ok(!existsSync(partialPathOf(modelsDir, 'tiny')) && !existsSync(modelPathOf(modelsDir, 'tiny')));
  }, 'pull-https-untrusted'));
});
