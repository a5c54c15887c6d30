/** Content digests of model files: SHA-256 of the whole file, streamed, never read whole. */
import { createHash } from 'node:crypto';
import { closeSync, constants, createReadStream, fstatSync, openSync, readlinkSync, realpathSync } from 'node:fs';
import { sep } from 'node:path';
import { fileStampOf, sameFile, type FileStamp } from '../domain/models.js';

export type HashProgress = (bytesRead: number) => void;

/**
 * A registered model's file opened at its recorded real path reached another file: a link stands
 * at the path or at a folder above it. Its bytes are not read: they may lie outside the models
 * directory, and a digest of them would tell what they are.
 */
export class LinkedPathError extends Error {
  override name = 'LinkedPathError';
  readonly code = 'ELINKED';
  constructor(path: string) {
    super(`${path} now leads elsewhere through a link, which is not followed`);
  }
}

/** What stands at a registered model's path is not a regular file (a pipe, a folder, a device): never read. */
export class NotRegularFileError extends Error {
  override name = 'NotRegularFileError';
  readonly code = 'ENOTREG';
  constructor(path: string) {
    super(`${path} is not a regular file, and is not read`);
  }
}

/** The file was written to, or replaced, while it was hashed: the digest would name no version of it. */
export class ChangedWhileReadError extends Error {
  override name = 'ChangedWhileReadError';
  readonly code = 'ECHANGED';
  constructor(path: string) {
    super(`${path} changed while it was read`);
  }
}

/** The real path of the open file `fd`: where the kernel found it, every link resolved. */
function realPathOf(fd: number, path: string): string {
  if (process.platform === 'linux') {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      // no /proc: resolved by name below, just after the open
    }
  }
  return realpathSync(path);
}

/** Whether `path` is `folder` or lies under it (both absolute and resolved, compared as written). */
export function isInside(folder: string, path: string): boolean {
  return path === folder || path.startsWith(folder.endsWith(sep) ? folder : folder + sep);
}

/**
 * Whether the open file `fd`, opened by the recorded `path` of a registered model, is that file:
 * reached through no link, or through links that end inside one of `within` (the real paths of
 * the models directories, where lmsp itself put it: a data directory that is a link, say).
 */
export function openedAt(fd: number, path: string, within: readonly string[]): boolean {
  const real = realPathOf(fd, path);
  return real === path || within.some((folder) => isInside(folder, real));
}

/**
 * Opens a registered model's file by its recorded path for reading, refusing one that a link
 * (at the path itself or at any folder above it) leads elsewhere (LinkedPathError), and anything
 * but a regular file (NotRegularFileError). Non-blocking: a FIFO put at the path cannot hold the
 * open, and with it the whole service, until something writes to it.
 */
export function openRegisteredFile(path: string, within: readonly string[]): number {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | (constants.O_NONBLOCK ?? 0));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') throw new LinkedPathError(path);
    throw error;
  }
  try {
    if (!openedAt(fd, path, within)) throw new LinkedPathError(path);
    if (!fstatSync(fd).isFile()) throw new NotRegularFileError(path);
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  return fd;
}

export interface HashedFile {
  digest: string;
  /** The stamp of the file that was read, the same when the read began and when it ended. */
  stamp: FileStamp;
}

/**
 * The digest of a registered model's file (see openRegisteredFile: `within` are the models
 * directories' real paths), never read through a link that leads elsewhere. Exactly the bytes
 * the file held when it was opened are read, so a file that keeps growing is not read forever;
 * a file written to or replaced meanwhile is ChangedWhileReadError.
 */
export async function hashFile(path: string, within: readonly string[], onProgress?: HashProgress): Promise<HashedFile> {
  const fd = openRegisteredFile(path, within);
  try {
    const before = fileStampOf(fstatSync(fd, { bigint: true }));
    const hash = createHash('sha256');
    let bytesRead = 0;
    if (before.sizeBytes > 0) {
      const chunks = createReadStream('', { fd, autoClose: false, start: 0, end: before.sizeBytes - 1, highWaterMark: 1 << 20 });
      for await (const chunk of chunks) {
        hash.update(chunk as Buffer);
        bytesRead += (chunk as Buffer).length;
        onProgress?.(bytesRead);
      }
    }
    if (bytesRead !== before.sizeBytes || !sameFile(before, fileStampOf(fstatSync(fd, { bigint: true })))) throw new ChangedWhileReadError(path);
    return { digest: `sha256:${hash.digest('hex')}`, stamp: before };
  } finally {
    closeSync(fd);
  }
}
