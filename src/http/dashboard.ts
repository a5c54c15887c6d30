/**
 * The web dashboard (LMSP 15): static files built from src/web by `npm run build`, holding no
 * secret (a person signs in with a pairing code; the token stays in the tab). `GET /` is the page
 * (revalidated on every load), `/assets/<name>-<hash>.<ext>` the files it loads (their names change
 * with their content, so they are cached for good). Every answer forbids what the page does not
 * need: scripts, styles, images and requests from anywhere but the service itself, framing, plugins.
 */
import fastifyStatic from '@fastify/static';
import { existsSync } from 'node:fs';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ServiceError } from '../domain/errors.js';
import { packagePath } from '../paths.js';

export const DASHBOARD_ROOT = packagePath('dist', 'web');
const ASSETS = packagePath('dist', 'web', 'assets');

export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const ASSET_NAME = /^[A-Za-z0-9_-]+\.(js|css|svg|map)$/;

function guard(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CONTENT_SECURITY_POLICY)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY')
    // A page on another origin that opens the dashboard keeps no handle to the window.
    .header('cross-origin-opener-policy', 'same-origin');
}

export async function registerDashboard(app: FastifyInstance): Promise<void> {
  // Files are sent by @fastify/static (types, ranges, ETags, conditional requests); the routes
  // are ours, so that each declares its access like every other route.
  await app.register(fastifyStatic, { serve: false, root: DASHBOARD_ROOT });

  app.get('/', { config: { access: 'public' }, schema: { hide: true } }, async (_request, reply) => {
    if (!existsSync(packagePath('dist', 'web', 'index.html'))) {
      throw new ServiceError('not_found', 'The dashboard was not built with this installation: run `npm run build`.');
    }
    // no-cache: the page names the current assets, so a browser asks again after every upgrade.
    return guard(reply).header('cache-control', 'no-cache').sendFile('index.html', DASHBOARD_ROOT, { cacheControl: false });
  });

  app.get('/assets/:name', { config: { access: 'public' }, schema: { hide: true } }, async (request, reply) => {
    const { name } = request.params as { name: string };
    if (!ASSET_NAME.test(name)) throw new ServiceError('not_found', `No route for GET ${request.url.split('?')[0]}.`);
    return guard(reply).sendFile(name, ASSETS, { immutable: true, maxAge: '365d' });
  });
}
