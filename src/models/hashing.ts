/** Content digests of model files: SHA-256 of the whole file, streamed, never read whole. */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

export type HashProgress = (bytesRead: number) => void;

export async function hashFile(path: string, onProgress?: HashProgress): Promise<string> {
  const hash = createHash('sha256');
  let bytesRead = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    hash.update(chunk as Buffer);
    bytesRead += (chunk as Buffer).length;
    onProgress?.(bytesRead);
  }
  return `sha256:${hash.digest('hex')}`;
}
