/**
 * The data directory's pairing key: 32 random bytes in `<data-dir>/pairing.key` (mode 0600),
 * made on first need. Pairing codes are stored as an HMAC with it (LMSP section 4), so a copy of
 * the database alone cannot be searched for a live code.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { readPrivateFile } from './private-file.js';

export const PAIRING_KEY_FILE = 'pairing.key';
const KEY_BYTES = 32;

export function loadPairingKey(dataDir: string): Buffer {
  const path = join(dataDir, PAIRING_KEY_FILE);
  try {
    const fd = openSync(path, 'wx', 0o600);
    try {
      writeSync(fd, randomBytes(KEY_BYTES));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const key = readPrivateFile(path);
  if (key.length !== KEY_BYTES) throw new Error(`${path} is damaged (it must hold ${KEY_BYTES} bytes); remove it to make a new one (open pairing codes then stop working)`);
  return key;
}
