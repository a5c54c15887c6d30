/**
 * Hostile pages and neighbours (LMSP section 2). A page of another site can make a browser send
 * requests to 127.0.0.1 (CSRF), and through DNS rebinding even read the answers under a name it
 * controls. So, before anything else:
 *
 * - a `Host` that is not `localhost`, `127.0.0.1` or `[::1]` (any port), the address the service
 *   listens on (any address of this machine when it listens on all of them) or a name of
 *   `--allowed-hosts` gets 421 `misdirected_request`: a rebound name never reaches a route;
 * - an `Origin` other than the service's own (`http://` + the request's allowed Host) or one of
 *   `--allowed-origins` gets 403 `origin_not_allowed`, before the pairing limiter or any token is
 *   looked at, so a page cannot even burn the pairing limiter;
 * - CORS headers go only to the allowed other origins, and their preflights are answered here.
 */
import { networkInterfaces } from 'node:os';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../domain/errors.js';
import { repeatedHost } from './edge.js';

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);
const ALL_INTERFACES = new Set(['0.0.0.0', '::', '[::]']);

const CORS_ALLOW_HEADERS = 'authorization, content-type, idempotency-key, last-event-id, accept';
const CORS_EXPOSE_HEADERS = 'location, lmsp-task-id, idempotent-replayed, retry-after, x-should-retry, x-request-id';
const CORS_METHODS = 'GET, POST, DELETE, OPTIONS';

/**
 * `name` of a Host header value, lower case, IPv6 kept in brackets; null when malformed (a port
 * past 65535 included). A port is any number of digits, none included (RFC 3986 3.2.3).
 */
export function hostName(host: string): string | null {
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d*))?$/.exec(host.trim());
  if (!match || (match[2] !== undefined && Number(match[2]) > 65535)) return null;
  return match[1]!.toLowerCase();
}

function bracketed(address: string): string {
  return address.includes(':') && !address.startsWith('[') ? `[${address}]` : address;
}

/** The host names this service answers to. */
export function allowedHostNames(listenHost: string, extra: readonly string[]): Set<string> {
  const names = new Set([...LOOPBACK_NAMES, ...extra.map((name) => bracketed(name.toLowerCase()))]);
  const listen = bracketed(listenHost.toLowerCase());
  if (ALL_INTERFACES.has(listen)) {
    // Listening everywhere: this machine's own addresses, as literals, are its names. A rebound
    // DNS name is never an address literal, so this opens nothing to a hostile page.
    for (const addresses of Object.values(networkInterfaces())) {
      for (const address of addresses ?? []) names.add(bracketed(address.address.toLowerCase().replace(/%.*$/, '')));
    }
  } else {
    names.add(listen);
  }
  return names;
}

/**
 * The authority of an absolute-form request target (`GET http://host/path`), which an origin
 * server takes instead of the Host header (RFC 9112 3.2.2); null for the usual origin form.
 */
function targetAuthority(url: string | undefined): string | null {
  const match = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(url ?? '');
  return match ? match[1]! : null;
}

export interface OriginPolicy {
  listenHost: string;
  allowedHosts: readonly string[];
  allowedOrigins: readonly string[];
}

/**
 * The headers a preflight of an allowed origin may send: ours, and whatever else the page asks
 * for. The origin is trusted by the operator, and the `openai` package sends headers of its own
 * (`X-Stainless-*`) that a fixed list would refuse (LMSP: OpenAI clients work unchanged).
 */
function preflightHeaders(requested: string | string[] | undefined): string {
  const names = new Set(CORS_ALLOW_HEADERS.split(', '));
  for (const name of String(requested ?? '').split(',')) {
    const trimmed = name.trim().toLowerCase();
    if (/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(trimmed)) names.add(trimmed);
  }
  return [...names].join(', ');
}

/** CORS headers for an allowed other origin (LMSP 2): only ever called with one. */
export function setCors(reply: FastifyReply, origin: string): void {
  reply.header('access-control-allow-origin', origin);
  reply.header('vary', 'Origin');
  reply.header('access-control-expose-headers', CORS_EXPOSE_HEADERS);
}

/**
 * Registers the checks, and returns them as a function (it throws the 421 or 403; it returns the
 * allowed other origin, if any) for what Fastify answers before any hook runs (a malformed URL).
 */
export function registerGuards(app: FastifyInstance, policy: OriginPolicy): (request: FastifyRequest) => string | null {
  const hosts = allowedHostNames(policy.listenHost, policy.allowedHosts);
  const crossOrigins = new Set(policy.allowedOrigins);

  const check = (request: FastifyRequest): string | null => {
    const repeated = repeatedHost(request.raw);
    if (repeated) throw repeated;
    const host = targetAuthority(request.raw.url) ?? request.headers.host;
    const name = host ? hostName(host) : null;
    if (!name || !hosts.has(name)) {
      throw new ServiceError('misdirected_request', `The Host '${String(host ?? '')}' is not served here.`);
    }
    const origin = request.headers.origin;
    if (origin === undefined) return null;
    if (origin === `http://${host!.trim().toLowerCase()}`) return null;
    if (!crossOrigins.has(origin)) throw new ServiceError('origin_not_allowed', `Requests from the origin '${origin}' are not allowed.`);
    return origin;
  };

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    // Every answer depends on Origin (a 403 for one page, CORS headers for another, none without
    // one): a cache keeps them apart.
    reply.header('vary', 'Origin');
    const origin = check(request);
    if (origin === null) return;
    setCors(reply, origin);
    if (request.method === 'OPTIONS') {
      // A preflight of an allowed origin: answered here, before auth (browsers send no token).
      reply.header('access-control-allow-methods', CORS_METHODS);
      reply.header('access-control-allow-headers', preflightHeaders(request.headers['access-control-request-headers']));
      reply.header('vary', 'Origin, Access-Control-Request-Headers');
      reply.header('access-control-max-age', '600');
      // Private Network Access (Chrome): a page the operator allowed, served from a public
      // address, asks before it reaches this loopback service; the answer says it may.
      if (request.headers['access-control-request-private-network'] === 'true') reply.header('access-control-allow-private-network', 'true');
      return reply.code(204).send();
    }
  });
  return check;
}
