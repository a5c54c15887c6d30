/** Where the package's own files are, wherever it was installed or built to. */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findPackageRoot(): string {
  let folder = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(folder, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'lmsp') return folder;
    const parent = dirname(folder);
    if (parent === folder) throw new Error('cannot find the lmsp package root');
    folder = parent;
  }
}

export const PACKAGE_ROOT = findPackageRoot();

export function packagePath(...segments: string[]): string {
  return join(PACKAGE_ROOT, ...segments);
}

export const SOFTWARE_VERSION: string = (JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { version: string }).version;
