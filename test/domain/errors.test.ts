import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { ERROR_CODES, TASK_ERROR_CODES } from '../../src/domain/errors.js';
import { packagePath } from '../../src/paths.js';

const SPEC_HTTP_CODES: Record<string, number> = {
  invalid_request: 400, invalid_json: 400, invalid_idempotency_key: 400, invalid_model_file: 400, context_length_exceeded: 400,
  invalid_token: 401, invalid_pairing_code: 401, insufficient_scope: 403, not_found: 404, model_not_found: 404,
  task_not_cancellable: 409, response_not_finished: 409, model_in_use: 409, idempotency_key_in_flight: 409,
  request_too_large: 413, unsupported_media_type: 415, idempotency_key_reused: 422, rate_limited: 429, storage_unavailable: 503,
  // added by sections 2, 5, 6 and 16
  unsupported_schema: 400, origin_not_allowed: 403, model_exists: 409, misdirected_request: 421, too_many_streams: 429, too_many_tasks: 429,
};

const SPEC_TASK_CODES = ['server_restarted', 'model_not_found', 'model_load_failed', 'model_digest_mismatch', 'context_length_exceeded', 'engine_error', 'download_failed'];
/**
 * LMSP 5.1: a pulled file is "validated as above", which fails with the registry's code; and an
 * id registered by someone else while the pull ran fails it with the code the create would get.
 */
const PULL_TASK_CODES = ['invalid_model_file', 'model_exists'];

describe('error codes (LMSP section 9)', () => {
  test('every code the spec names exists with its status', () => {
    for (const [code, status] of Object.entries(SPEC_HTTP_CODES)) {
      assert.equal(ERROR_CODES[code as keyof typeof ERROR_CODES]?.status, status, code);
    }
    assert.deepEqual([...TASK_ERROR_CODES].sort(), [...SPEC_TASK_CODES, ...PULL_TASK_CODES].sort());
  });

  test('every code is documented in docs/errors.md with the same status', () => {
    const doc = readFileSync(packagePath('docs', 'errors.md'), 'utf8');
    for (const [code, definition] of Object.entries(ERROR_CODES)) {
      const row = doc.split('\n').find((line) => line.startsWith(`| \`${code}\` |`));
      assert.ok(row, `docs/errors.md documents ${code}`);
      assert.ok(row.includes(`| ${definition.status} |`), `${code} is documented as ${definition.status}`);
      assert.ok(row.includes(`\`${definition.type}\``), `${code} is documented with type ${definition.type}`);
    }
    for (const code of TASK_ERROR_CODES) assert.ok(doc.includes(`| \`${code}\` |`), `task code ${code} documented`);
  });
});
