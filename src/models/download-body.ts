/**
 * Receiving one answer's body into the partial file (LMSP 5.1): each chunk is checked (the GGUF
 * magic, no more bytes than declared), hashed, counted for progress and copied into a write
 * block; full blocks are appended to the file one after another while the next fills, with the
 * socket paused while the disk catches up. Every byte received before a dropped connection or
 * an abort is still written, so a resume asks for as little as possible.
 */
import type { Hash } from 'node:crypto';
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
/** Writes of 4 MiB: few system calls; three blocks, so one is written while the next fills. */
const BLOCK_BYTES = 4 << 20;
const BLOCKS = 3;

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
 * Reports progress at most once per interval, and only when bytes arrived. Bytes that arrived
 * too soon after a report are reported when the interval is up, even if no more come (a server
 * that stalls shows what it sent), and before the download ends, however it ends; so every pull
 * that fetched bytes has at least one progress report (with the whole size when it is known).
 */
export class ProgressReporter {
  private lastAt = -1;
  private lastBytes = 0;
  private reported = false;
  /** The file's bytes and total as last heard, reported or not. */
  private latest: { downloadedBytes: number; totalBytes: number | null } | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly onProgress: ((progress: DownloadProgress) => void) | undefined, private readonly intervalMs: number) {}

  /** A body starts at `bytes` of the file; the interval keeps running across bodies. */
  begin(bytes: number): void {
    if (this.lastAt < 0) this.lastAt = performance.now();
    this.lastBytes = bytes;
    this.latest = null;
  }

  update(downloadedBytes: number, totalBytes: number | null): void {
    if (!this.onProgress) return;
    this.latest = { downloadedBytes, totalBytes };
    if (downloadedBytes === this.lastBytes) return;
    const now = performance.now();
    const elapsed = now - this.lastAt;
    if (elapsed >= this.intervalMs) {
      this.report(now, elapsed, downloadedBytes, totalBytes);
      return;
    }
    if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.flush();
      }, this.intervalMs - elapsed);
      this.timer.unref();
    }
  }

  /** Reports the bytes heard of and not reported yet, if any. */
  flush(): void {
    const latest = this.latest;
    if (!this.onProgress || !latest || this.lastAt < 0 || latest.downloadedBytes === this.lastBytes) return;
    const now = performance.now();
    this.report(now, Math.max(1, now - this.lastAt), latest.downloadedBytes, latest.totalBytes);
  }

  /** The file is whole: the first report, if there was none and bytes arrived. */
  finish(downloadedBytes: number, totalBytes: number | null): void {
    this.stop();
    if (!this.onProgress || this.reported || this.lastAt < 0 || downloadedBytes === this.lastBytes) return;
    const now = performance.now();
    this.report(now, Math.max(1, now - this.lastAt), downloadedBytes, totalBytes);
  }

  /** The download ended without a whole file: what arrived is reported, and nothing after. */
  end(): void {
    this.stop();
    this.flush();
  }

  private stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private report(now: number, elapsed: number, downloadedBytes: number, totalBytes: number | null): void {
    this.stop();
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
  if (error.code === 'EISDIR' || error.code === 'ERR_FS_EISDIR') {
    return new DownloadError('file_error', 'a folder has the name of the partial file (<id>.gguf.partial) in the models directory: remove it and pull again', { cause: error });
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

/**
 * Copies body bytes into blocks and appends them to the sink, one write at a time, in the order
 * received: a block goes when it is full or when the disk is idle. `onBlocked` is called with
 * true when every block is full or being written (stop reading) and with false when one is free
 * again. A single read (at most 1 MiB) always fits the block being filled.
 */
class BlockWriter {
  private readonly free: Buffer[] = [];
  private current: Buffer;
  private filled = 0;
  private readonly queue: { buffer: Buffer; length: number }[] = [];
  private writing: Promise<void> | null = null;
  private unflushed = 0;
  private blocked = false;
  /** The first write error; nothing is written after it. */
  private error: NodeJS.ErrnoException | null = null;

  constructor(private readonly sink: PartialSink, private readonly onBlocked: (blocked: boolean) => void, private readonly onError: () => void) {
    for (let index = 1; index < BLOCKS; index++) this.free.push(Buffer.allocUnsafe(BLOCK_BYTES));
    this.current = Buffer.allocUnsafe(BLOCK_BYTES);
  }

  push(buffer: Buffer, start: number, end: number): void {
    while (start < end) {
      const bytes = Math.min(end - start, BLOCK_BYTES - this.filled);
      buffer.copy(this.current, this.filled, start, start + bytes);
      this.filled += bytes;
      start += bytes;
      if (this.filled === BLOCK_BYTES) this.submit();
    }
    // An idle disk takes what there is at once: a slow download is on disk as it arrives (a
    // crash loses little, progress is real), a fast one fills whole blocks while a write runs.
    if (!this.writing && this.filled > 0) this.submit();
  }

  /** Writes what is left; resolves once every write settled, rejects with the first write error. */
  async drain(): Promise<void> {
    if (this.filled > 0) this.submit();
    while (this.writing) await this.writing;
    if (this.error) throw this.error;
  }

  /** Hands over the block being filled and starts a fresh one. */
  private takeCurrent(): { buffer: Buffer; length: number } {
    const block = { buffer: this.current, length: this.filled };
    this.filled = 0;
    // Never without a block to fill: should reading not stop in time, a block more is made.
    this.current = this.free.pop() ?? Buffer.allocUnsafe(BLOCK_BYTES);
    return block;
  }

  /** The block being filled, when it has bytes and nothing else waits (the writer goes on with it). */
  private takePartial(): { buffer: Buffer; length: number } | undefined {
    return this.filled === 0 || this.error ? undefined : this.takeCurrent();
  }

  private submit(): void {
    this.queue.push(this.takeCurrent());
    if (this.free.length === 0 && !this.blocked) {
      this.blocked = true;
      this.onBlocked(true);
    }
    this.writing ??= this.writeQueued();
  }

  private async writeQueued(): Promise<void> {
    // Nothing of the loop runs before `writing` holds this promise. After a write error the loop
    // awaits nothing (blocks are dropped unwritten): run at once, it cleared `writing` before
    // `??=` stored the promise, which then never cleared, and `drain` awaited it in a loop of
    // microtasks that starved the whole service.
    await Promise.resolve();
    for (let block = this.queue.shift(); block; block = this.queue.shift() ?? this.takePartial()) {
      if (!this.error) {
        try {
          await this.sink.append(block.buffer, block.length);
          this.unflushed += block.length;
          if (this.unflushed >= FLUSH_BEHIND_BYTES) {
            this.unflushed = 0;
            this.sink.flushBehind?.();
          }
        } catch (error) {
          this.error = error as NodeJS.ErrnoException;
          this.onError();
        }
      }
      this.free.push(block.buffer);
      if (this.blocked) {
        this.blocked = false;
        this.onBlocked(false);
      }
    }
    this.writing = null;
  }
}

export interface BodyInput {
  opened: OpenedResponse;
  plan: Extract<BodyPlan, { kind: 'write' }>;
  state: FileState;
  sink: PartialSink;
  progress: ProgressReporter;
  signal: AbortSignal;
  /** For a body of unknown size: the most bytes the disk can take for it (download.ts, assertRoomFor). */
  room?: number;
}

/**
 * Streams the body into the sink and flushes it to disk; resolves with the body bytes received.
 * Rejects with a DownloadError, or with the abort's error when the signal fired; the sink is
 * closed either way.
 */
export async function receiveBody({ opened, plan, state, sink, progress, signal, room }: BodyInput): Promise<number> {
  let received = 0;
  // A write error stops the download at once: the rest of the body has nowhere to go.
  const writer = new BlockWriter(sink, (blocked) => (blocked ? opened.pause() : opened.resume()), () => opened.discard());
  progress.begin(state.size);
  /** An error of this side (a check, or the caller's callback) rather than of the connection. */
  let stopped: { error: unknown } | null = null;
  const accept = (buffer: Buffer, start: number, end: number) => {
    const chunk = buffer.subarray(start, end);
    try {
      checkMagic(state, chunk, opened.url);
      received += chunk.length;
      if (plan.bodyBytes !== null && received > plan.bodyBytes) {
        throw new DownloadError('length_mismatch', `${describeUrl(opened.url)} sent more than the ${plan.bodyBytes} bytes it declared`);
      }
      if (plan.bodyBytes === null && room !== undefined && received > room) {
        throw new DownloadError('disk_full', `${describeUrl(opened.url)} sent more than the ${room} bytes the models directory can take `
          + '(a body of undeclared size is stopped before it fills the disk the database needs)');
      }
      state.hash.update(chunk);
      state.size += chunk.length;
      progress.update(state.size, plan.totalBytes);
    } catch (error) {
      // A check that failed, or the caller's progress callback: never an uncaught exception.
      stopped = { error };
      throw error;
    }
    writer.push(buffer, start, end);
  };
  const failure = await opened.readBody(accept).then(() => null, (error: unknown) => error ?? new Error('the body failed'));
  try {
    // Every byte received is written, whatever ended the body.
    await writer.drain().catch((error: NodeJS.ErrnoException) => {
      throw fileFailure(error);
    });
    const own = stopped as { error: unknown } | null; // assigned in accept
    if (own) throw own.error;
    if (failure) {
      if (failure instanceof DownloadError) throw failure;
      if (signal.aborted) throw failure;
      const timeout = opened.timeoutError();
      if (timeout) throw timeout;
      throw new DownloadError('connection_lost', `the connection to ${describeUrl(opened.url)} was lost after ${received} bytes`, { resumable: true, cause: failure });
    }
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
