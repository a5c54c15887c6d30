// Lint rules: the recommended sets of ESLint and typescript-eslint, on sources, tests and benchmarks.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
);
