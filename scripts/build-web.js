#!/usr/bin/env node
// Builds the dashboard (LMSP 15) from src/web into dist/web, at `npm run build` (which `npm install`
// runs through `prepare`), never on the user's side: one script bundle and one style sheet, each
// named by the hash of its content so that browsers may cache them for good, and an index.html
// that names them (served with no-cache). Nothing is fetched at run time: no CDN.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { build } from 'esbuild';

const root = new URL('..', import.meta.url).pathname;
const source = join(root, 'src', 'web');
const out = join(root, 'dist', 'web');
const assets = join(out, 'assets');

rmSync(out, { recursive: true, force: true });
mkdirSync(assets, { recursive: true });

const result = await build({
  entryPoints: { app: join(source, 'main.tsx') },
  outdir: assets,
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  bundle: true,
  minify: true,
  format: 'esm',
  // Current Chromium and Firefox (LMSP 15), and Safari of the same years.
  target: ['chrome111', 'firefox111', 'safari16'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'eof',
  metafile: true,
  logLevel: 'warning',
});

function outputOf(extension) {
  const name = Object.keys(result.metafile.outputs).find((file) => file.endsWith(extension));
  if (!name) throw new Error(`the dashboard build produced no ${extension} file`);
  return basename(name);
}

// The icon is copied under a hashed name too.
const icon = readFileSync(join(source, 'favicon.svg'));
const iconName = `favicon-${createHash('sha256').update(icon).digest('hex').slice(0, 8).toUpperCase()}.svg`;
writeFileSync(join(assets, iconName), icon);

const html = readFileSync(join(source, 'index.html'), 'utf8')
  .replaceAll('%APP_JS%', `assets/${outputOf('.js')}`)
  .replaceAll('%APP_CSS%', `assets/${outputOf('.css')}`)
  .replaceAll('%FAVICON%', `assets/${iconName}`);
if (/%[A-Z_]+%/.test(html)) throw new Error('src/web/index.html has a placeholder the build does not know');
writeFileSync(join(out, 'index.html'), html);

const sizes = Object.entries(result.metafile.outputs).map(([file, info]) => `${relative(root, file)} ${(info.bytes / 1024).toFixed(1)} KiB`);
if (process.env.LMSP_BUILD_VERBOSE) console.log(sizes.join('\n'));
