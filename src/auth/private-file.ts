/**
 * The data directory's own small files (the operator token, the pairing key, the service file):
 * read without following a link put in their place, and written to a file made new, never
 * through a file or link already there.
 */
import { closeSync, constants, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';

export function readPrivateFile(path: string): Buffer {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes `data` to a new file at `path` (mode 0600), removing whatever stood there first. */
export function writeNewPrivateFile(path: string, data: string): void {
  rmSync(path, { force: true });
  writeFileSync(path, data, { mode: 0o600, flag: 'wx' });
}
