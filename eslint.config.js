// Lint rules: the recommended sets of ESLint and typescript-eslint, on sources, tests and
// benchmarks, and the rule of the layers of src/ (docs/architecture.md).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The floors of src/, from the top. A file may import its own room and any room of a floor
 * below; never a room of a floor above, never another room of its own floor. `service` is the
 * composition root (src/service.ts). The utilities at the root of src/ (time.ts, ids.ts,
 * paths.ts, config.ts) may be imported from every floor but the domain, and import only each
 * other.
 */
export const FLOORS = [
  ['cli'],
  ['service'],
  ['http'],
  ['tasks'],
  ['models', 'auth'],
  ['store', 'engine', 'api'],
  ['domain'],
];
const UTILITIES = ['time', 'ids', 'paths', 'config', 'logging'];
const ROOMS = FLOORS.flat();

/** An import specifier's regex for rooms `names`, from a file `depth` folders below src/. */
function reaching(names, depth) {
  const up = depth === 0 ? '\\./' : '(\\.\\./){' + depth + '}';
  return `^${up}(${names.join('|')})(/|\\.js$)`;
}

function layerRules() {
  const configs = [];
  FLOORS.forEach((floor, level) => {
    const above = FLOORS.slice(0, level).flat();
    for (const room of floor) {
      if (room === 'service') continue; // a file, handled with the root files below
      const forbidden = [...above, ...floor.filter((other) => other !== room)];
      const message = `${room}/ may not import this: dependencies point down the floors of src/ (docs/architecture.md)`;
      for (const depth of [1, 2, 3]) {
        const patterns = forbidden.length > 0 ? [{ regex: reaching(forbidden, depth), message }] : [];
        if (room === 'domain') patterns.push({ regex: '^\\.\\./', message: 'domain/ imports nothing of the project (docs/architecture.md)' });
        configs.push({
          files: [`src/${room}/${'*/'.repeat(depth - 1)}*.ts`],
          rules: { 'no-restricted-imports': ['error', { patterns }] },
        });
      }
    }
  });
  configs.push({
    files: UTILITIES.map((name) => `src/${name}.ts`),
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: reaching(ROOMS, 0), message: 'the utilities of src/ import only each other (docs/architecture.md)' }] }],
    },
  });
  configs.push({
    files: ['src/service.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ regex: reaching(['cli'], 0), message: 'service.ts may not import the CLI (docs/architecture.md)' }] }] },
  });
  return configs;
}

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.scratch/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', fetch: 'readonly', performance: 'readonly', TextDecoder: 'readonly', TextDecoderStream: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', Headers: 'readonly', Response: 'readonly', RequestInit: 'readonly', URLSearchParams: 'readonly', NodeJS: 'readonly' },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  ...layerRules(),
);
