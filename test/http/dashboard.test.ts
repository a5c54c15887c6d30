/**
 * LMSP 15: GET / serves the dashboard as static files built at `npm run build`: no secret in them,
 * correct types, the page revalidated and the hashed assets cached for good, a Content-Security-
 * Policy that allows only the service itself.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { withService } from '../helpers/service.js';

describe('the dashboard files (LMSP 15)', () => {
  test('GET / is the page: HTML, no-cache, CSP of self only, no secret, assets by relative hashed names', () => withService({}, async (service) => {
    const page = await fetch(`${service.url}/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.equal(page.headers.get('cache-control'), 'no-cache');
    const csp = page.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /connect-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.ok(!/unsafe-inline|unsafe-eval|https?:|\*/.test(csp), `only 'self': ${csp}`);
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
    // A page that opens the dashboard in a window gets no handle on it (to navigate it elsewhere).
    assert.equal(page.headers.get('cross-origin-opener-policy'), 'same-origin');
    const html = await page.text();
    assert.ok(!html.includes(service.token), 'the page holds no token');
    assert.ok(!/https?:\/\//.test(html), 'the page loads nothing from elsewhere');
    const assets = [...html.matchAll(/(?:src|href)="(assets\/[^"]+)"/g)].map((match) => match[1]!);
    assert.deepEqual(assets.map((asset) => asset.split('.').pop()).sort(), ['css', 'js', 'svg']);

    for (const asset of assets) {
      const response = await fetch(`${service.url}/${asset}`);
      assert.equal(response.status, 200, asset);
      assert.match(response.headers.get('cache-control') ?? '', /max-age=31536000.*immutable/, asset);
      const type = response.headers.get('content-type') ?? '';
      if (asset.endsWith('.js')) assert.match(type, /^(text|application)\/javascript/);
      if (asset.endsWith('.css')) assert.match(type, /^text\/css/);
      if (asset.endsWith('.svg')) assert.match(type, /^image\/svg\+xml/);
      const body = await response.text();
      assert.ok(!body.includes(service.token), `${asset} holds no token`);
      assert.ok(!/lmsp_[A-Za-z0-9_-]{43}/.test(body), `${asset} holds nothing shaped like a token`);
    }
  }));

  test('unknown or malformed asset names get the JSON 404 of the API, never a file outside the assets', () => withService({}, async (service) => {
    for (const path of ['/assets/nope.js', '/assets/..%2Fpackage.json', '/assets/%2e%2e%2f%2e%2e%2fpackage.json', '/assets/index.html', '/index.html']) {
      const response = await fetch(`${service.url}${path}`);
      assert.equal(response.status, 404, path);
      assert.equal(((await response.json()) as { error: { code: string } }).error.code, 'not_found', path);
    }
  }));
});
