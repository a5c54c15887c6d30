/**
 * A generation's saved state is a cache for exact resumes (LMSP 7.5): one that cannot be written
 * (a full disk, a folder that cannot be made) leaves the generation going, without a state.
 */
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runGeneration, sampling, withEngine } from '../helpers/engine.js';

describe('saved states (LMSP 7.5)', () => {
  test('a state that cannot be written does not end the generation', { timeout: 120_000 }, () =>
    // Slow tokens, so that the generation lasts long enough to save states (every 250 ms at least).
    withEngine({ tokenDelayMs: 5 }, async ({ engine, dir, tiny }) => {
      const request = { messages: [{ role: 'user' as const, content: 'Write on.' }], sampling: sampling(7, 300) };
      const reference = await runGeneration(engine, tiny, request);
      assert.equal(reference.tokens.length, 300);
      // The state folder's name taken by a file: every save fails, as on a full disk.
      const stateDir = join(dir, 'state');
      rmSync(stateDir, { recursive: true, force: true });
      writeFileSync(stateDir, '');
      const blocked = await runGeneration(engine, tiny, request);
      assert.equal(blocked.finishReason, 'max_output_tokens');
      assert.equal(blocked.text, reference.text, 'the same text as with states saved');
    }));
});
