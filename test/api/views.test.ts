import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { outputItemStatusOf, responseStatusOf } from '../../src/api/views.js';

describe('wire views (LMSP section 6)', () => {
  test('response status follows the task status; stopped by max_output_tokens is incomplete', () => {
    assert.equal(responseStatusOf({ status: 'queued', finishReason: null }), 'queued');
    assert.equal(responseStatusOf({ status: 'loading', finishReason: null }), 'in_progress');
    assert.equal(responseStatusOf({ status: 'running', finishReason: null }), 'in_progress');
    assert.equal(responseStatusOf({ status: 'cancelling', finishReason: null }), 'in_progress');
    assert.equal(responseStatusOf({ status: 'completed', finishReason: 'stop' }), 'completed');
    assert.equal(responseStatusOf({ status: 'completed', finishReason: 'max_output_tokens' }), 'incomplete');
    assert.equal(responseStatusOf({ status: 'failed', finishReason: null }), 'failed');
    assert.equal(responseStatusOf({ status: 'cancelled', finishReason: null }), 'cancelled');
  });

  test('the output message is incomplete when its task stopped early', () => {
    assert.equal(outputItemStatusOf({ status: 'running', finishReason: null }), 'in_progress');
    assert.equal(outputItemStatusOf({ status: 'completed', finishReason: 'stop' }), 'completed');
    assert.equal(outputItemStatusOf({ status: 'completed', finishReason: 'max_output_tokens' }), 'incomplete');
    assert.equal(outputItemStatusOf({ status: 'failed', finishReason: null }), 'incomplete');
    assert.equal(outputItemStatusOf({ status: 'cancelled', finishReason: null }), 'incomplete');
  });
});
