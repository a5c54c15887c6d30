/**
 * The partial file of a pull (LMSP 5.1: `<id>.gguf.partial` in the models directory): the bytes
 * received so far, always a prefix of the remote file, so its size alone says where a resume
 * starts. Written through a stream with backpressure, flushed to disk before it is renamed into
 * place, and never renamed over an existing file.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { constants } from 'node:fs';
import { lstatSync } from 'node:fs';
import { link, lstat, open, rename, rm, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Where downloaded bytes go. Tests substitute one that fails like a full disk. */
export interface PartialSink {
  /**
   * Appends `buffer[0, length)` to the file. Called one at a time (the next after the previous
   * settled); the buffer is the caller's again once the promise settles.
   */
  append(buffer: Buffer, length: number): Promise<void>;
  /** Flushes the file to stable storage (after the last append). */
  sync(): Promise<void>;
  /** Closes the file; never throws. */
  close(): Promise<void>;
  /** Starts flushing what is written so far to disk in the background (optional). */
  flushBehind?(): void;
}

export type OpenPartialSink = (path: string, mode: 'append' | 'truncate') => Promise<PartialSink>;

export const openPartialFile: OpenPartialSink = async (path, mode) => {
  // Only a regular file of the download's own is written: whatever is at the name when a pull
  // starts from zero is removed first (a link planted there is removed, not followed), and a link
  // is never opened (O_NOFOLLOW: ELOOP instead).
  if (mode === 'truncate') await rm(path, { force: true });
  const flags = constants.O_WRONLY | constants.O_CREAT | (constants.O_NOFOLLOW ?? 0) | (mode === 'append' ? constants.O_APPEND : constants.O_EXCL);
  const handle = await open(path, flags, 0o644);
  let closing: Promise<void> | null = null;
  let flushing: Promise<void> | null = null;
  return {
    async append(buffer, length) {
      // A write may take less than asked (a signal, a nearly full disk): write the rest.
      for (let offset = 0; offset < length;) {
        const { bytesWritten } = await handle.write(buffer, offset, length - offset, null);
        if (bytesWritten === 0) throw Object.assign(new Error('EIO: a write of the model file wrote nothing'), { code: 'EIO', syscall: 'write' });
        offset += bytesWritten;
      }
    },
    // Errors of a background flush come back from this final one.
    sync: async () => {
      await flushing;
      await handle.sync();
    },
    flushBehind() {
      flushing ??= handle.datasync().catch(() => undefined).finally(() => (flushing = null));
    },
    close() {
      closing ??= (async () => {
        await flushing;
        await handle.close().catch(() => undefined);
      })();
      return closing;
    },
  };
};

/** The size of the partial file, 0 when there is none or when what has its name is not a regular file (a link is not followed). */
export async function partialSize(path: string): Promise<number> {
  try {
    return sizeOfRegularFile(await lstat(path));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
}

/** The same, read now, for an event that reports it (`model.pull.resumed`); 0 for what cannot be read. */
export function partialSizeNow(path: string): number {
  try {
    return sizeOfRegularFile(lstatSync(path));
  } catch {
    return 0;
  }
}

function sizeOfRegularFile(info: { isFile(): boolean; size: number }): number {
  return info.isFile() ? info.size : 0;
}

export interface HashedPrefix {
  hash: Hash;
  /** The first bytes of the file (at most 4), for the GGUF magic. */
  head: Buffer;
}

/**
 * Hashes the first `bytes` bytes of a partial file. Node's Hash cannot be saved and restored, so
 * a resume reads back what is on disk (at the speed of SHA-256 over the page cache or the disk).
 */
export async function hashPrefix(path: string, bytes: number, signal: AbortSignal): Promise<HashedPrefix> {
  const hash = createHash('sha256');
  let head = Buffer.alloc(0);
  if (bytes === 0) return { hash, head };
  for await (const chunk of createReadStream(path, { start: 0, end: bytes - 1, highWaterMark: 1 << 20, signal })) {
    const buffer = chunk as Buffer;
    if (head.length < 4) head = Buffer.concat([head, buffer.subarray(0, 4 - head.length)]);
    hash.update(buffer);
  }
  return { hash, head };
}

async function syncFolder(folder: string): Promise<void> {
  // Some platforms cannot open or fsync a folder; the rename then is as durable as they allow.
  const handle = await open(folder, 'r').catch(() => null);
  if (!handle) return;
  await handle.sync().catch(() => undefined);
  await handle.close().catch(() => undefined);
}

/**
 * Moves the finished partial file to its final name, refusing to replace an existing file: a
 * hard link fails with EEXIST atomically, where a rename would silently overwrite. File systems
 * without hard links fall back to a check then a rename.
 */
export async function publishPartial(partial: string, target: string): Promise<'published' | 'exists'> {
  try {
    await link(partial, target);
    await unlink(partial);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return 'exists';
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS' && code !== 'EXDEV') throw error;
    if (await stat(target).then(() => true, () => false)) return 'exists';
    await rename(partial, target);
  }
  await syncFolder(dirname(target));
  return 'published';
}

/** Removes a partial file after a final failure; a missing one is fine. */
export async function removePartial(path: string): Promise<void> {
  await rm(path, { force: true });
}
