#!/usr/bin/env node
// The package's executable: run the compiled CLI (built by `npm install` / `npm run build`).
import('../dist/src/cli/main.js').catch((error) => {
  if (error && error.code === 'ERR_MODULE_NOT_FOUND' && String(error.message).includes('dist/src/cli/main.js')) {
    process.stderr.write('lmsp is not built yet: run `npm install` (or `npm run build`) in the checkout first.\n');
    process.exit(1);
  }
  throw error;
});
