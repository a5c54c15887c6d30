#!/usr/bin/env node
// Runs the compiled test files with Node's own test runner. Node 20 takes no glob patterns, so
// the files are listed here; arguments filter them by path (`npm test -- crash`).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const testRoot = join(root, 'dist', 'test');

function collect(folder) {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    if (statSync(path).isDirectory()) return collect(path);
    return name.endsWith('.test.js') ? [path] : [];
  });
}

const filters = process.argv.slice(2);
const files = collect(testRoot)
  .filter((file) => filters.length === 0 || filters.some((filter) => relative(testRoot, file).includes(filter)))
  .sort();
if (files.length === 0) {
  console.error(`no test files match ${filters.join(' ')}`);
  process.exit(1);
}
const concurrency = process.env.LMSP_TEST_CONCURRENCY ?? '2';
const result = spawnSync(process.execPath, ['--test', `--test-concurrency=${concurrency}`, ...files], { stdio: 'inherit' });
process.exit(result.status ?? 1);
