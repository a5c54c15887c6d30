/**
 * Receiving one answer's body into the partial file (LMSP 5.1): each chunk is checked (the GGUF
 * magic, no more bytes than declared), hashed, counted for progress and written, with the
 * socket paused while the disk catches up. Every byte received before a dropped connection or
 * an abort is still written, so a resume asks for as little as possible.
 */
import type { Hash } from 'node:crypto';
import type { Writable } from 'node:stream';
import { DownloadError, describeUrl } from './download-errors.js';
import type { OpenedResponse } from './download-http.js';
import type { BodyPlan } from './download-plan.js';
import type { PartialSink } from './partial-file.js';

export const GGUF_MAGIC = Buffer.from('GGUF', 'latin1');
/**
 * The partial file is flushed to disk in the background every this many bytes, so that the
 * fsync before the rename has little left to write instead of the whole file.
 */
const FLUSH_BEHIND_BYTES = 32 << 20;

export interface DownloadProgress {
  /** Bytes of the file on disk so far, resumed ones included. */
  downloadedBytes: number;
  totalBytes: number | null;
  /** Over the interval since the previous report. */
  bytesPerSecond: number;
}

/** The partial file as far as it is known: every byte of it is in `hash`. */
export interface FileState {
  size: number;
  hash: Hash;
  /** The first bytes of the file (at most 4), for the GGUF magic. */
  head: Buffer;
}

/**
 * Reports progress at most once per interval, and only when bytes arrived. A download that ends
 * before its first interval still reports once, at its end, so that every pull that fetched bytes
 * has at least one progress report (with the whole size when it is known).
 */
export class ProgressReporter {
  private lastAt = -1;
  private lastBytes = 0;
  private reported = false;

  constructor(private readonly onProgress: ((progress: DownloadProgress) => void) | undefined, private readonly intervalMs: number) {}

  /** A body starts at `bytes` of the file; the interval keeps running across bodies. */
  begin(bytes: number): void {
    if (this.lastAt < 0) this.lastAt = performance.now();
    this.lastBytes = bytes;
  }

  update(downloadedBytes: number, totalBytes: number | null): void {
    if (!this.onProgress) return;
    const now = performance.now();
    const elapsed = now - this.lastAt;
    if (elapsed < this.intervalMs || downloadedBytes === this.lastBytes) return;
    this.report(now, elapsed, downloadedBytes, totalBytes);
  }

  /** The file is whole: the first report, if there was none and bytes arrived. */
  finish(downloadedBytes: number, totalBytes: number | null): void {
    if (!this.onProgress || this.reported || this.lastAt < 0 || downloadedBytes === this.lastBytes) return;
    const now = performance.now();
    this.report(now, Math.max(1, now - this.lastAt), downloadedBytes, totalBytes);
  }

  private report(now: number, elapsed: number, downloadedBytes: number, totalBytes: number | null): void {
    const bytesPerSecond = Math.max(0, Math.round(((downloadedBytes - this.lastBytes) * 1000) / elapsed));
    this.lastAt = now;
    this.lastBytes = downloadedBytes;
    this.reported = true;
    this.onProgress!({ downloadedBytes, totalBytes, bytesPerSecond });
  }
}

export function fileFailure(error: NodeJS.ErrnoException): DownloadError {
  if (error.code === 'ENOSPC' || error.code === 'EDQUOT') {
    return new DownloadError('disk_full', 'the disk is full: the model file could not be written', { cause: error });
  }
  return new DownloadError('file_error', `the model file could not be written: ${error.code ?? error.message}`, { cause: error });
}

function checkMagic(state: FileState, chunk: Buffer, url: URL): void {
  if (state.head.length >= GGUF_MAGIC.length) return;
  state.head = Buffer.concat([state.head, chunk.subarray(0, GGUF_MAGIC.length - state.head.length)]);
  if (!GGUF_MAGIC.subarray(0, state.head.length).equals(state.head)) {
    throw new DownloadError('not_gguf', `${describeUrl(url)} is not a GGUF file (it does not start with the GGUF magic)`);
  }
}

/** Ends the stream once its writes are done; rejects with the first error of any of them. */
function endStream(stream: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.end((error?: Error | null) => (error ? reject(error) : resolve()));
  });
}

export interface BodyInput {
  opened: OpenedResponse;
  plan: Extract<BodyPlan, { kind: 'write' }>;
  state: FileState;
  sink: PartialSink;
  progress: ProgressReporter;
  signal: AbortSignal;
}

/**
 * Streams the body into the sink and flushes it to disk; resolves with the body bytes received.
 * Rejects with a DownloadError, or with the abort's error when the signal fired; the sink is
 * closed either way.
 */
export async function receiveBody({ opened, plan, state, sink, progress, signal }: BodyInput): Promise<number> {
  const { stream } = sink;
  const { response } = opened;
  let received = 0;
  // Write errors are taken from the write callbacks: a file stream reports ENOSPC there first,
  // and its 'error' event may come only after end() has already called back.
  let writeError: Error | null = null;
  const onWritten = (error?: Error | null) => {
    if (!error || writeError) return;
    writeError = error;
    opened.discard();
  };
  stream.on('error', onWritten);
  progress.begin(state.size);
  let unflushed = 0;
  /** An error of this side (a check, or the caller's callback) rather than of the connection. */
  let stopped: { error: unknown } | null = null;
  // 'data' events rather than an async iterator: each chunk moves into the file stream's buffer
  // as it is parsed, so a connection that drops does not take unread chunks down with it (a
  // destroyed response discards what it buffered). The socket is paused only while the disk
  // is behind. The chunks that came while the resume state was recorded go first.
  const failure = await new Promise<unknown>((settle) => {
    let settled = false;
    const done = (outcome: unknown) => {
      if (settled) return;
      settled = true;
      stream.off('drain', resume);
      settle(outcome);
    };
    const resume = () => response.resume();
    const accept = (chunk: Buffer) => {
      if (settled) return;
      try {
        checkMagic(state, chunk, opened.url);
        received += chunk.length;
        if (plan.bodyBytes !== null && received > plan.bodyBytes) {
          throw new DownloadError('length_mismatch', `${describeUrl(opened.url)} sent more than the ${plan.bodyBytes} bytes it declared`);
        }
        state.hash.update(chunk);
        state.size += chunk.length;
        progress.update(state.size, plan.totalBytes);
      } catch (error) {
        // A check that failed, or the caller's progress callback: never an uncaught exception.
        stopped = { error };
        opened.discard();
        done(error);
        return;
      }
      unflushed += chunk.length;
      if (unflushed >= FLUSH_BEHIND_BYTES) {
        unflushed = 0;
        sink.flushBehind?.();
      }
      if (!stream.write(chunk, onWritten) && !response.isPaused()) {
        response.pause();
        stream.once('drain', resume);
      }
    };
    for (const chunk of opened.takeEarlyChunks()) accept(chunk);
    response.on('data', accept);
    response.once('end', () => done(null));
    response.once('error', (error) => done(error));
    const closed = () => done(response.errored ?? (response.complete ? null : new Error('the connection closed before the body ended')));
    response.once('close', closed);
    if (response.readableEnded) done(null);
    else if (response.destroyed) closed();
    else if (!stream.writableNeedDrain) response.resume();
    else stream.once('drain', resume);
  });
  try {
    if (writeError) throw fileFailure(writeError);
    const own = stopped as { error: unknown } | null; // assigned in the 'data' handler
    if (own) throw own.error;
    await endStream(stream).catch((error: NodeJS.ErrnoException) => {
      throw fileFailure(error);
    });
    if (failure) {
      if (signal.aborted) throw failure;
      const timeout = opened.timeoutError();
      if (timeout) throw timeout;
      throw new DownloadError('connection_lost', `the connection to ${describeUrl(opened.url)} was lost after ${received} bytes`, { resumable: true, cause: failure });
    }
    const late = await opened.closed;
    if (late) throw new DownloadError('length_mismatch', `${describeUrl(opened.url)} sent more bytes than its Content-Length`, { cause: late });
    if (plan.bodyBytes !== null && received < plan.bodyBytes) {
      throw new DownloadError('length_mismatch', `${describeUrl(opened.url)} ended its body after ${received} of ${plan.bodyBytes} bytes`);
    }
    await sink.sync().catch((error: NodeJS.ErrnoException) => {
      throw fileFailure(error);
    });
    return received;
  } finally {
    opened.discard();
    await sink.close();
  }
}
