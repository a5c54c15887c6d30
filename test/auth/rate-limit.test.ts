/**
 * LMSP 4: at most 5 failed pairing attempts a minute per remote address, counted before anything
 * is awaited; an address whose minute has passed is forgotten, so the table stays bounded however
 * many addresses try (the service bound beyond loopback).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { attemptKey, FailureRateLimiter } from '../../src/auth/rate-limit.js';

describe('the pairing rate limiter (LMSP 4)', () => {
  test('five failures a window per address, then the seconds to wait; a success is forgiven', () => {
    const limiter = new FailureRateLimiter(5, 60_000);
    for (let i = 0; i < 5; i++) assert.ok('succeeded' in limiter.begin('a', 1000 + i));
    assert.deepEqual(limiter.begin('a', 2000), { retryAfterSeconds: 59 });
    assert.ok('succeeded' in limiter.begin('b', 2000), 'another address has its own attempts');
    assert.ok('succeeded' in limiter.begin('a', 61_000), 'the oldest failure left the window');
    const forgiven = new FailureRateLimiter(1, 60_000);
    const attempt = forgiven.begin('c', 0);
    assert.ok('succeeded' in attempt);
    attempt.succeeded();
    assert.ok('succeeded' in forgiven.begin('c', 1), 'a success does not count');
  });

  test('every loopback address is one: a neighbour cannot spread its attempts over 127.0.0.0/8', () => {
    for (const address of ['127.0.0.1', '127.0.0.2', '127.255.3.4', '::1', '::ffff:127.0.0.9', '0:0:0:0:0:0:0:1']) {
      assert.equal(attemptKey(address), 'loopback', address);
    }
    assert.equal(attemptKey('::ffff:192.0.2.7'), '192.0.2.7', 'an IPv4-mapped address counts as its IPv4 address');
    assert.equal(attemptKey('192.0.2.7'), '192.0.2.7');
    assert.equal(attemptKey('2001:DB8::1'), '2001:db8::1');
    // The machine's own other addresses are this machine too (a service listening beyond loopback).
    assert.equal(attemptKey('192.0.2.2', ['10.0.0.1', '192.0.2.2']), 'loopback');
    assert.equal(attemptKey('::ffff:192.0.2.2', ['192.0.2.2']), 'loopback');
    assert.equal(attemptKey('192.0.2.7', ['192.0.2.2']), '192.0.2.7');
    const limiter = new FailureRateLimiter(5, 60_000);
    for (let i = 1; i <= 5; i++) assert.ok('succeeded' in limiter.begin(attemptKey(`127.0.0.${i}`), i));
    assert.ok('retryAfterSeconds' in limiter.begin(attemptKey('127.0.0.99'), 10), 'a sixth loopback address is refused too');
  });

  test('addresses whose window has passed are forgotten, so many one-time addresses do not pile up', () => {
    const limiter = new FailureRateLimiter(5, 60_000);
    for (let i = 0; i < 5000; i++) limiter.begin(`2001:db8::${i.toString(16)}`, i);
    assert.ok(limiter.addresses <= 5000);
    limiter.begin('2001:db8::ffff:1', 120_000);
    assert.equal(limiter.addresses, 1, 'only the address with an attempt in its window is kept');
  });
});
