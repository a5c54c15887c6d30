import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DownloadError } from '../../src/models/download-errors.js';
import { DISK_RESERVE_BYTES, downloadModel, modelPathOf, partialPathOf, type DownloadOptions } from '../../src/models/download.js';
import { readGgufFacts } from '../../src/models/gguf.js';
import { openPartialFile, type OpenPartialSink } from '../../src/models/partial-file.js';
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

let paths = 0;
/** Serves the model at a path of its own, so that each test reads its own request log. */
function servedPath(body: Buffer = MODEL): string {
  const path = `/f${++paths}/tiny.gguf`;
  server.serve(path, body);
  return path;
}

function options(modelsDir: string, path: string, extra: Partial<DownloadOptions> = {}): DownloadOptions {
  const settings = pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: server.url });
  return { source: parsePullSource(`${server.url}${path}`, settings), settings, modelsDir, id: 'tiny', ...extra };
}

async function failure(download: Promise<unknown>, reason: string, code: string, resumable: boolean): Promise<DownloadError> {
  const error = await download.then(() => assert.fail(`expected ${reason}`), (caught: unknown) => caught);
  assert.ok(error instanceof DownloadError, `a DownloadError, not ${String(error)}`);
  assert.equal(error.reason, reason, error.message);
  assert.equal(error.code, code);
  assert.equal(error.resumable, resumable);
  return error;
}

function partialBytes(modelsDir: string): Buffer | null {
  const path = partialPathOf(modelsDir, 'tiny');
  return existsSync(path) ? readFileSync(path) : null;
}

/** A final failure leaves neither a partial file nor a model file behind. */
function nothingLeft(modelsDir: string): void {
  assert.equal(partialBytes(modelsDir), null, 'no partial file is left');
  assert.ok(!existsSync(modelPathOf(modelsDir, 'tiny')), 'no model file appeared');
}

/** Lets `limit` bytes through to the real partial file, then fails every write as a full disk does. */
function fullDiskAfter(limit: number): OpenPartialSink {
  return async (path, mode) => {
    const real = await openPartialFile(path, mode);
    let written = 0;
    return {
      ...real,
      async append(buffer, length) {
        const room = Math.max(0, limit - written);
        if (room > 0) await real.append(buffer, Math.min(room, length));
        written += Math.min(room, length);
        if (length > room) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });
      },
    };
  };
}

interface RawServer {
  url: string;
  /** The head of each request, in order. */
  requests: string[];
  close(): Promise<void>;
}

/** A bare TCP server for answers the model server cannot give: `answer` writes the bytes of each, by hand. */
async function startRawServer(answer: (socket: Socket, index: number) => void): Promise<RawServer> {
  const requests: string[] = [];
  const sockets = new Set<Socket>();
  const raw = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let head = '';
    const onData = (data: Buffer) => {
      head += data.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      requests.push(head.slice(0, end));
      answer(socket, requests.length - 1);
    };
    socket.on('data', onData);
  });
  await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(raw.address() as AddressInfo).port}`,
    requests,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => raw.close(() => resolve()));
    },
  };
}

async function withRawServer(answer: (socket: Socket, index: number) => void, run: (raw: RawServer) => Promise<void>): Promise<void> {
  const raw = await startRawServer(answer);
  try {
    await run(raw);
  } finally {
    await raw.close();
  }
}

function rawOptions(raw: RawServer, modelsDir: string, extra: Partial<DownloadOptions> = {}): DownloadOptions {
  const settings = pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: raw.url });
  return { source: parsePullSource(`${raw.url}/tiny.gguf`, settings), settings, modelsDir, id: 'tiny', ...extra };
}

describe('model download failures (LMSP 5.1, 9)', () => {
  test('a connection dropped halfway is resumable: the bytes received stay, the resume asks for the rest', () => withDataDir(async (modelsDir) => {
    const path = servedPath();
    server.behaveOnce(path, { dropAfterBytes: HALF });
    const error = await failure(downloadModel(options(modelsDir, path)), 'connection_lost', 'download_failed', true);
    assert.match(error.message, new RegExp(`after ${HALF} bytes`));
    assert.ok(partialBytes(modelsDir)?.equals(MODEL.subarray(0, HALF)), 'every byte received is on disk');
    const result = await downloadModel(options(modelsDir, path));
    assert.equal(server.requestsTo(path).at(-1)!.range, `bytes=${HALF}-`);
    assert.equal(result.digest, sha256Digest(MODEL));
  }, 'pull-drop'));

  test('a body shorter than its Content-Length is a truncated transfer (resumable)', () => withDataDir(async (modelsDir) => {
    const path = servedPath();
    server.behaveOnce(path, { omitBytes: 1000 });
    await failure(downloadModel(options(modelsDir, path)), 'connection_lost', 'download_failed', true);
    assert.equal(partialBytes(modelsDir)?.length, MODEL.length - 1000);
  }, 'pull-truncated'));

  test('a body longer than its Content-Length fails (length_mismatch) and leaves nothing', () => withDataDir(async (modelsDir) => {
    const path = servedPath();
    server.behaveOnce(path, { declaredLength: MODEL.length - 1000 });
    const error = await failure(downloadModel(options(modelsDir, path)), 'length_mismatch', 'download_failed', false);
    assert.match(error.message, /more bytes than its Content-Length/);
    nothingLeft(modelsDir);
  }, 'pull-overlong'));

  test('range answers that lie about their length fail and leave nothing', () => withDataDir(async (modelsDir) => {
    const cases = [
      { behaviour: { declaredLength: 5 }, message: /Content-Length 5 disagrees with Content-Range/ },
      { behaviour: { chunked: true, extraBytes: 100 }, message: /sent more than the \d+ bytes it declared/ },
      { behaviour: { chunked: true, omitBytes: 100 }, message: /ended its body after \d+ of \d+ bytes/ },
    ];
    for (const { behaviour, message } of cases) {
      const path = servedPath();
      server.behaveOnce(path, { dropAfterBytes: HALF });
      await failure(downloadModel(options(modelsDir, path)), 'connection_lost', 'download_failed', true);
      server.behaveOnce(path, behaviour);
      const error = await failure(downloadModel(options(modelsDir, path)), 'length_mismatch', 'download_failed', false);
      assert.match(error.message, message);
      assert.equal(server.requestsTo(path).at(-1)!.range, `bytes=${HALF}-`);
      nothingLeft(modelsDir);
    }
  }, 'pull-range-lies'));

  test('a file that is not GGUF is refused on its first bytes: the transfer is cut short', () => withDataDir(async (modelsDir) => {
    const page = Buffer.alloc(2_000_000, '<html><body>Sign in to download this model</body></html>\n');
    const path = servedPath(page);
    server.behaveOnce(path, { bytesPerSecond: 1_000_000 });
    const error = await failure(downloadModel(options(modelsDir, path)), 'not_gguf', 'invalid_model_file', false);
    assert.match(error.message, /not a GGUF file/);
    const [request] = server.requestsTo(path);
    assert.equal(request!.completed, false, 'the client hung up');
    assert.ok(request!.bodyBytesSent < page.length / 2, `only ${request!.bodyBytesSent} of ${page.length} bytes were sent`);
    nothingLeft(modelsDir);
  }, 'pull-not-gguf'));

  test('an empty file is not GGUF', () => withDataDir(async (modelsDir) => {
    await failure(downloadModel(options(modelsDir, servedPath(Buffer.alloc(0)))), 'not_gguf', 'invalid_model_file', false);
    nothingLeft(modelsDir);
  }, 'pull-empty'));

  test('404 is final; 500 is resumable and keeps the partial file', () => withDataDir(async (modelsDir) => {
    const missing = await failure(downloadModel(options(modelsDir, '/nothing/here.gguf')), 'http_status', 'download_failed', false);
    assert.equal(missing.status, 404);
    assert.match(missing.message, /answered 404/);
    nothingLeft(modelsDir);
    const path = servedPath();
    server.behaveOnce(path, { dropAfterBytes: HALF });
    await failure(downloadModel(options(modelsDir, path)), 'connection_lost', 'download_failed', true);
    server.behaveOnce(path, { status: 500 });
    const broken = await failure(downloadModel(options(modelsDir, path)), 'http_status', 'download_failed', true);
    assert.equal(broken.status, 500);
    assert.equal(partialBytes(modelsDir)?.length, HALF, 'the partial file is kept for a later attempt');
  }, 'pull-status'));

  test('a digest other than the expected one fails with model_digest_mismatch and removes the partial file', () => withDataDir(async (modelsDir) => {
    const expected = `sha256:${'0'.repeat(64)}`;
    const error = await failure(downloadModel(options(modelsDir, servedPath(), { expectedDigest: expected })), 'digest_mismatch', 'model_digest_mismatch', false);
    assert.ok(error.message.includes(sha256Digest(MODEL)) && error.message.includes(expected));
    nothingLeft(modelsDir);
  }, 'pull-digest'));

  test('a file that fails validation gets invalid_model_file with the validator\'s reason', () => withDataDir(async (modelsDir) => {
    const corrupt = Buffer.from(MODEL);
    corrupt.fill(0xff, 8, 16); // an impossible tensor count
    const validate = async (path: string) => void (await readGgufFacts(path));
    const error = await failure(downloadModel(options(modelsDir, servedPath(corrupt), { validate })), 'invalid_model_file', 'invalid_model_file', false);
    assert.match(error.message, /tensor count .*is not plausible/);
    nothingLeft(modelsDir);
  }, 'pull-invalid'));

  test('an existing <id>.gguf is never overwritten', () => withDataDir(async (modelsDir) => {
    const path = servedPath();
    writeFileSync(modelPathOf(modelsDir, 'tiny'), 'mine');
    await failure(downloadModel(options(modelsDir, path)), 'target_exists', 'download_failed', false);
    assert.equal(readFileSync(modelPathOf(modelsDir, 'tiny'), 'utf8'), 'mine');
    assert.equal(server.requestsTo(path).length, 0, 'nothing was fetched');
    assert.equal(partialBytes(modelsDir), null);
  }, 'pull-exists'));

  test('a full disk (ENOSPC from the destination) fails with disk_full and removes the partial file', () => withDataDir(async (modelsDir) => {
    const error = await failure(downloadModel(options(modelsDir, servedPath(), { openPartial: fullDiskAfter(HALF) })), 'disk_full', 'download_failed', false);
    assert.match(error.message, /disk is full/);
    nothingLeft(modelsDir);
  }, 'pull-enospc'));

  test('a full disk for real: a 256 KiB tmpfs', (t) => withDataDir(async (dataDir) => {
    const modelsDir = join(dataDir, 'small');
    mkdirSync(modelsDir);
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', modelsDir], { encoding: 'utf8' });
    if (mounted.status !== 0) {
      t.skip(`mounting a tmpfs is not permitted here (${(mounted.stderr || mounted.error?.message || '').trim()})`);
      return;
    }
    try {
      await failure(downloadModel(options(modelsDir, servedPath())), 'disk_full', 'download_failed', false);
      nothingLeft(modelsDir);
    } finally {
      spawnSync('umount', [modelsDir]);
    }
  }, 'pull-tmpfs'));

  test('a connection that goes quiet is dropped after the idle timeout (resumable)', () => withDataDir(async (modelsDir) => {
    const path = servedPath();
    server.behaveOnce(path, { stallAfterBytes: 100_000 });
    await failure(downloadModel(options(modelsDir, path, { idleTimeoutMs: 300 })), 'timeout', 'download_failed', true);
    assert.equal(partialBytes(modelsDir)?.length, 100_000);
  }, 'pull-idle'));

  test('interim 1xx answers without end do not hold the pull: no final answer within the idle timeout is a timeout (resumable)', () => withDataDir(async (modelsDir) => {
    const timers: NodeJS.Timeout[] = [];
    await withRawServer((socket) => {
      timers.push(setInterval(() => socket.write('HTTP/1.1 102 Processing\r\n\r\n'), 20));
    }, async (raw) => {
      try {
        const started = performance.now();
        const error = await failure(downloadModel(rawOptions(raw, modelsDir, { idleTimeoutMs: 400 })), 'timeout', 'download_failed', true);
        assert.match(error.message, /no final answer from .* within 400 ms \(interim 1xx answers do not count\)/);
        assert.ok(performance.now() - started < 5000, 'ended at its deadline');
      } finally {
        for (const timer of timers) clearInterval(timer);
      }
    });
  }, 'pull-endless-interim'));

  test('interim answers before the final head within the idle timeout are skipped: the model is taken', () => withDataDir(async (modelsDir) => {
    await withRawServer((socket) => {
      socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n');
      setTimeout(() => socket.end(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${MODEL.length}\r\n\r\n`), MODEL])), 100);
    }, async (raw) => {
      const result = await downloadModel(rawOptions(raw, modelsDir, { idleTimeoutMs: 2000 }));
      assert.equal(result.digest, sha256Digest(MODEL));
    });
  }, 'pull-interim'));

  test('a slow disk is not a silent server: the idle timeout runs only while the download waits for the server', () => withDataDir(async (modelsDir) => {
    // 20 MiB fill every write block, so reading stops for each 250 ms write, longer than the timeout.
    const body = Buffer.concat([MODEL.subarray(0, 4), Buffer.alloc(20 << 20, 7)]);
    const path = servedPath(body);
    let writes = 0;
    const slowDisk: OpenPartialSink = async (file, mode) => {
      const real = await openPartialFile(file, mode);
      return {
        ...real,
        async append(buffer, length) {
          writes += 1;
          await new Promise((resolve) => setTimeout(resolve, 250));
          await real.append(buffer, length);
        },
      };
    };
    const result = await downloadModel(options(modelsDir, path, { idleTimeoutMs: 100, openPartial: slowDisk }));
    assert.equal(result.sizeBytes, body.length);
    assert.equal(result.digest, sha256Digest(body));
    assert.ok(writes >= 5, `the disk was the bottleneck (${writes} writes)`);
    assert.equal(server.requestsTo(path).length, 1, 'one request: the connection was never dropped as idle');
  }, 'pull-slow-disk'));

  test('a connection closed before the answer, or within its head, is dropped (resumable), not a malformed answer', () => withDataDir(async (modelsDir) => {
    for (const sent of ['', 'HTTP/1.1 200 OK\r\nContent-Le']) {
      await withRawServer((socket) => socket.end(sent), async (raw) => {
        const error = await failure(downloadModel(rawOptions(raw, modelsDir)), 'connection_failed', 'download_failed', true);
        assert.match(error.message, /closed before the response head was complete/);
        assert.equal(raw.requests.length, 1);
      });
    }
  }, 'pull-closed-before-answer'));

  test('a server that keeps the connection open after the whole body: the body is taken, however short the idle timeout', () => withDataDir(async (modelsDir) => {
    const held: Socket[] = [];
    await withRawServer((socket) => {
      held.push(socket); // closed only when the server is
      socket.write(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${MODEL.length}\r\nConnection: close\r\n\r\n`), MODEL]));
    }, async (raw) => {
      const result = await downloadModel(rawOptions(raw, modelsDir, { idleTimeoutMs: 100 }));
      assert.equal(result.digest, sha256Digest(MODEL));
      assert.equal(raw.requests.length, 1, 'the body was not dropped as idle and asked for again');
    });
    assert.equal(held.length, 1);
  }, 'pull-held-open'));

  test('a Content-Length sent twice is one length: a petabyte declared twice fails before a byte is written', () => withDataDir(async (modelsDir) => {
    const declared = 2 ** 50;
    await withRawServer((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${declared}\r\nContent-Length: ${declared}\r\n\r\n`);
      socket.write(MODEL.subarray(0, 4096)); // then silence, the connection held open
    }, async (raw) => {
      const error = await failure(downloadModel(rawOptions(raw, modelsDir, { idleTimeoutMs: 5000 })), 'disk_full', 'download_failed', false);
      assert.match(error.message, new RegExp(`needs ${declared} more bytes`));
      nothingLeft(modelsDir);
    });
  }, 'pull-repeated-length'));

  test('a body of undeclared size that goes on without end is stopped at the room the disk has, less the reserve: disk_full, nothing left', () => withDataDir(async (modelsDir) => {
    let written = 0;
    await withRawServer((socket) => {
      // Chunked, no Content-Length: a GGUF header, then zeros for ever (until the client hangs up).
      socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
      const zeros = Buffer.alloc(64 * 1024);
      const send = (chunk: Buffer) => socket.write(`${chunk.length.toString(16)}\r\n`) && socket.write(chunk) && socket.write('\r\n');
      send(MODEL.subarray(0, 4096));
      const pump = () => {
        while (!socket.destroyed && written < 64 * 1024 * 1024) {
          written += zeros.length;
          if (!send(zeros)) return void socket.once('drain', pump);
        }
      };
      socket.on('error', () => undefined);
      pump();
    }, async (raw) => {
      // A disk with the reserve and 2 MiB more free.
      const diskFree = () => Promise.resolve(DISK_RESERVE_BYTES + 2 * 1024 * 1024);
      const error = await failure(downloadModel(rawOptions(raw, modelsDir, { diskFree })), 'disk_full', 'download_failed', false);
      assert.match(error.message, /sent more than the 2097152 bytes the models directory can take/);
      nothingLeft(modelsDir);
    });
    assert.ok(written < 16 * 1024 * 1024, `the client stopped reading early (${written} bytes sent)`);
  }, 'pull-endless-chunked'));

  test('a refused connection is resumable', () => withDataDir(async (modelsDir) => {
    const closed = await startModelServer();
    const url = `${closed.url}/tiny.gguf`;
    await closed.close();
    const settings = pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: closed.url });
    const download = downloadModel({ source: parsePullSource(url, settings), settings, modelsDir, id: 'tiny' });
    const error = await failure(download, 'connection_failed', 'download_failed', true);
    assert.match(error.message, /ECONNREFUSED/);
  }, 'pull-refused'));
});
