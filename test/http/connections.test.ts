/** What a client holds open (LMSP sections 4 and 16), tested on the registry itself. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConnectionRegistry } from '../../src/http/connections.js';

describe('ConnectionRegistry: revoking a client ends what it holds open (LMSP 4)', () => {
  test('a request bound before the revoke ends with it', () => {
    const registry = new ConnectionRegistry({ perClient: 4, total: 8 });
    let closed = 0;
    registry.bind('cli_a', () => (closed += 1));
    registry.bind('cli_b', () => assert.fail('another client is left alone'));
    registry.endClient('cli_a');
    assert.equal(closed, 1);
  });

  test('a request that passed the token check before the revoke but binds after it ends at once', async () => {
    const registry = new ConnectionRegistry({ perClient: 4, total: 8 });
    registry.endClient('cli_a');
    let closed = 0;
    registry.bind('cli_a', () => (closed += 1));
    await Promise.resolve();
    assert.equal(closed, 1);
    const untie = registry.bind('cli_a', () => assert.fail('untied before it was ended'));
    untie();
    await Promise.resolve();
    let other = 0;
    registry.bind('cli_b', () => (other += 1));
    await Promise.resolve();
    assert.equal(other, 0, 'another client is left alone');
  });
});
