/** A fresh data directory per test, removed on success and kept (with its path printed) on failure. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function makeDataDir(label = 'test'): string {
  return mkdtempSync(join(tmpdir(), `lmsp-${label.replace(/[^a-z0-9]+/gi, '-').slice(0, 40)}-`));
}

export async function withDataDir<T>(run: (dataDir: string) => Promise<T> | T, label?: string): Promise<T> {
  const dataDir = makeDataDir(label);
  try {
    const result = await run(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
    return result;
  } catch (error) {
    console.error(`# data directory kept for inspection: ${dataDir}`);
    throw error;
  }
}
