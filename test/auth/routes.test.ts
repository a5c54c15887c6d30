import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { routeTable } from '../../src/http/app.js';
import { SCOPES } from '../../src/domain/clients.js';
import { buildTestApp } from '../helpers/app.js';
import { withDataDir } from '../helpers/data-dir.js';

// The dashboard's page and assets are public: they hold no secret (LMSP 15).
const PUBLIC = new Set(['GET /v1/service', 'GET /healthz', 'POST /v1/pair', 'GET /openapi.json', 'GET /', 'GET /assets/:name']);

function concrete(url: string): string {
  return url.replace(':id', 'x_doesnotexist');
}

describe('every route declares its access (LMSP section 4)', () => {
  test('each route has an access rule; only the documented ones are public', () => withDataDir(async (dir) => {
    const { app, close } = await buildTestApp(dir);
    try {
      const routes = routeTable(app);
      assert.ok(routes.length >= 20, `${routes.length} routes`);
      for (const route of routes) {
        const key = `${route.method} ${route.url}`;
        assert.ok(route.access, key);
        assert.equal(route.access === 'public', PUBLIC.has(key), `${key} is ${route.access}`);
        assert.ok(route.access === 'public' || route.access === 'authenticated' || (SCOPES as readonly string[]).includes(route.access), key);
      }
    } finally {
      await close();
    }
  }));

  test('every non-public route answers 401 invalid_token with WWW-Authenticate without a token, and with a bad one', () => withDataDir(async (dir) => {
    const { app, close } = await buildTestApp(dir);
    try {
      for (const route of routeTable(app).filter((r) => r.access !== 'public')) {
        for (const authorization of [undefined, 'Bearer lmsp_' + 'A'.repeat(43), 'Bearer not-a-token', 'Basic abc']) {
          const response = await app.inject({
            method: route.method as 'GET',
            url: concrete(route.url),
            headers: authorization ? { authorization } : {},
            ...(route.method === 'POST' ? { payload: {} } : {}),
          });
          assert.equal(response.statusCode, 401, `${route.method} ${route.url} with ${authorization}`);
          assert.equal(response.headers['www-authenticate'], 'Bearer');
          assert.equal(response.json().error.code, 'invalid_token');
        }
      }
    } finally {
      await close();
    }
  }));
});
