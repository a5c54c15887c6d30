/**
 * Builds the Fastify app: JSON only, errors in the LMSP shape (section 9), every route declaring
 * the scope it needs (section 4), and the routes of each resource from their own file.
 */
import { maxHeaderSize } from 'node:http';
import fastifySwagger from '@fastify/swagger';
import Ajv from 'ajv';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { ERROR_CODES, ServiceError, invalidRequest } from '../domain/errors.js';
import { SOFTWARE_VERSION } from '../paths.js';
import { newRequestId } from '../ids.js';
import { isStorageError, toStorageUnavailable } from '../store/db.js';
import type { AppContext, RouteAccess, RouteAnswers } from './context.js';
import { registerAuth } from './auth.js';
import {
  answerWhatNodeWouldRefuse, capConnections, clientErrorHandler, connectionCap, continueRequest, DRAIN_FACTOR, drainRequest, HEADERS_TIMEOUT_MS, jsonDepthExceeds,
  JSON_SUFFIX_MEDIA_TYPE, KEEP_ALIVE_TIMEOUT_MS, loneSurrogatePath, MAX_JSON_DEPTH, openFileLimit, REQUEST_TIMEOUT_MS, RESERVED_FILES, TIMEOUT_CHECK_INTERVAL_MS,
} from './edge.js';
import { allowedHostNames, hostName, registerGuards, setCors } from './guards.js';
import { registerServiceRoutes } from './routes/service.js';
import { registerResponseRoutes } from './routes/responses.js';
import { registerTaskRoutes } from './routes/tasks.js';
import { registerModelRoutes } from './routes/models.js';
import { registerPullRoutes } from './routes/pulls.js';
import { registerClientRoutes } from './routes/clients.js';
import { registerEmbeddingRoutes } from './routes/embeddings.js';
import { registerChatCompletionRoutes } from './routes/chat-completions.js';
import { CLIENT_CLOSED_REQUEST, countRefusedRequest, countRequests, metricsOf, registerMetrics } from './metrics.js';
import { registerDashboard } from './dashboard.js';
import { lastEventIdOf } from './streams.js';

/** JSON Pointer of an ajv error to an OpenAI-style param: `/input/0/role` -> `input[0].role`. */
export function paramFromPointer(pointer: string, missing?: string): string | null {
  const parts = pointer.split('/').slice(1).map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (missing) parts.push(missing);
  let param = '';
  for (const part of parts) param += /^\d+$/.test(part) ? `[${part}]` : param ? `.${part}` : part;
  return param || null;
}

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
  /** Set on the errors of a `propertyNames` schema: the key they are about. */
  propertyName?: string;
}

function validationError(errors: AjvError[], part: string): ServiceError {
  // The deepest error is the most specific (anyOf reports its branches first, then itself).
  const error = [...errors].sort((a, b) => b.instancePath.length - a.instancePath.length)[0]!;
  const missing = error.keyword === 'required' ? String(error.params.missingProperty) : undefined;
  const param = paramFromPointer(error.instancePath, missing) ?? (part === 'body' ? null : part);
  if (missing) return invalidRequest(param, `Missing required parameter: '${param}'.`);
  if (error.keyword === 'type' && !error.instancePath) return invalidRequest(null, `The ${part} must be a JSON object.`);
  // A key at fault (`propertyNames`, as for metadata keys): say so, and which key.
  const key = errors.find((candidate) => candidate.keyword === 'propertyNames');
  if (key) {
    const name = String(key.params.propertyName);
    // Ajv reports what is wrong with the key in an error of its own, marked with the key.
    const reason = errors.find((candidate) => candidate.keyword !== 'propertyNames' && candidate.propertyName === name)?.message ?? 'is not allowed';
    const shown = name.length > 70 ? `${name.slice(0, 64)}...` : name;
    return invalidRequest(param, `Invalid key in '${param}': '${shown}' ${reason}.`);
  }
  return invalidRequest(param, `Invalid value for '${param}': ${alternativesMessage(error, errors)}.`);
}

/**
 * What the value must be, said once for every alternative the schema allows there: a field that
 * takes a string or an array (`anyOf` of the two) must be "a string or an array", not only the
 * first alternative Ajv tried. A value of one of the types allowed broke a rule of that type's
 * alternative (an empty array where one item is needed): that rule alone is said, not the other
 * types, which the client did not mean.
 */
function alternativesMessage(error: AjvError, errors: AjvError[]): string {
  const here = errors.filter((candidate) => candidate.instancePath === error.instancePath);
  const types = new Set<string>();
  for (const candidate of here) {
    if (candidate.keyword === 'type') for (const type of String(candidate.params.type).split(',')) types.add(type);
  }
  const others = [...new Set(here.filter((candidate) => !['type', 'if', 'anyOf', 'oneOf'].includes(candidate.keyword)).map(readableMessage))];
  if (others.length > 0) return others.join(', or ');
  return types.size > 0 ? typesMessage([...types]) : readableMessage(error);
}

/** A type union said as a person would: `integer,null` -> `must be an integer or null`. */
function typesMessage(types: string[]): string {
  const named = types.map((type) => (type === 'null' ? 'null' : `${/^[aeiou]/.test(type) ? 'an' : 'a'} ${type}`));
  return `must be ${named.length > 1 ? `${named.slice(0, -1).join(', ')} or ${named.at(-1)}` : named[0]}`;
}

/** Ajv's message, with a type union and an enum's values said as a person would. */
function readableMessage(error: AjvError): string {
  if (error.keyword === 'type') return typesMessage(String(error.params.type).split(','));
  if (error.keyword === 'minItems') {
    const limit = Number(error.params.limit);
    return limit === 1 ? 'must not be an empty array' : `must have at least ${limit} items`;
  }
  if (error.keyword === 'enum' && Array.isArray(error.params.allowedValues)) {
    return `must be one of ${error.params.allowedValues.map((value) => JSON.stringify(value)).join(', ')}`;
  }
  return error.message ?? 'not allowed';
}

function sendError(reply: FastifyReply, error: ServiceError): FastifyReply {
  const definition = ERROR_CODES[error.code];
  reply.code(definition.status);
  for (const [name, value] of Object.entries(error.headers)) reply.header(name, value);
  if ('retryable' in definition && definition.retryable === false) reply.header('x-should-retry', 'false');
  if (error.code === 'invalid_token') reply.header('www-authenticate', 'Bearer');
  return reply.send(error.toBody());
}

/** Any error to the ServiceError a client sees. */
export function toServiceError(error: unknown): ServiceError {
  if (error instanceof ServiceError) return error;
  if (isStorageError(error)) return toStorageUnavailable(error);
  const fastifyError = error as FastifyError & { validation?: AjvError[]; validationContext?: string };
  if (fastifyError.validation) return validationError(fastifyError.validation, fastifyError.validationContext ?? 'body');
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ServiceError('request_too_large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ServiceError('unsupported_media_type');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ServiceError('invalid_json', `The request body is not valid JSON: ${fastifyError.message}`);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return invalidRequest(null, 'The Content-Length header does not match the body.');
  }
  if (error instanceof SyntaxError) return new ServiceError('invalid_json', `The request body is not valid JSON: ${error.message}`);
  return new ServiceError('internal_error', undefined, { cause: error });
}

interface QuerySchema {
  properties?: Record<string, { type?: string | string[] }>;
}

/**
 * What type coercion would let through in a query string (LMSP 2: a field of the wrong type is a
 * 400 naming it): an integer must be written in decimal digits (`0x10`, `1e1`, `+1`, ` 1` and
 * `1.0` are refused, not read as numbers; `05` is 5, as a cursor's digits are read), and no field
 * may be given twice.
 */
function queryTextCheck(schema: QuerySchema): (query: Record<string, unknown>) => ServiceError | null {
  const properties = Object.entries(schema.properties ?? {});
  const integers = new Set(properties.filter(([, property]) => [property.type].flat().includes('integer')).map(([name]) => name));
  const known = new Set(properties.map(([name]) => name));
  return (query) => {
    for (const [name, value] of Object.entries(query ?? {})) {
      if (!known.has(name)) continue;
      if (Array.isArray(value)) return invalidRequest(name, `Invalid value for '${name}': it is given more than once.`);
      if (integers.has(name) && typeof value === 'string' && !/^-?[0-9]+$/.test(value)) {
        return invalidRequest(name, `Invalid value for '${name}': must be an integer written in decimal digits.`);
      }
    }
    return null;
  };
}

export interface RouteEntry {
  method: string;
  url: string;
  access: RouteAccess;
}

const routeTables = new WeakMap<FastifyInstance, RouteEntry[]>();

/** Every route's errors in the OpenAPI document: one shape, LMSP section 9 (docs/errors.md lists the codes). */
const ERROR_ANSWER = {
  description: 'An error: its HTTP status and code are listed in docs/errors.md.',
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['type', 'code', 'message', 'param'],
      properties: {
        type: { type: 'string' },
        code: { type: 'string' },
        message: { type: 'string' },
        param: { type: ['string', 'null'] },
      },
    },
  },
} as const;

/** The 404 of a request that no route serves. */
function noRoute(request: FastifyRequest): ServiceError {
  return new ServiceError('not_found', `No route for ${request.method} ${request.url.split('?')[0]}.`);
}

/** How the OpenAPI document describes the headers that every POST, or every stream, reads. */
const IDEMPOTENCY_KEY_HEADER = {
  type: 'string', minLength: 1, maxLength: 255, pattern: '^[!-~]+$',
  description: 'LMSP 8 (docs/idempotency.md): a retry with the same key answers what the first request did, and does it once',
};
const LAST_EVENT_ID_HEADER = {
  type: 'string', pattern: '^[0-9]+$',
  description: 'LMSP 7.3: with a stream, the sequence number of the last event received; the stream continues after it',
};

/** Every route of an app with the access it declares (for docs and for the test that checks them). */
export function routeTable(app: FastifyInstance): RouteEntry[] {
  return routeTables.get(app) ?? [];
}

export async function buildApp(context: AppContext): Promise<FastifyInstance> {
  const { config } = context;
  let guard: ((request: FastifyRequest) => string | null) | null = null;
  const metrics = metricsOf(context);
  const app = Fastify({
    ...(context.logger ? { loggerInstance: context.logger as FastifyBaseLogger } : { logger: false }),
    // Every answer names its request (`x-request-id`, as OpenAI's API does, read by the `openai`
    // package as `_request_id`), and the service's log lines about it carry the same id.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    genReqId: newRequestId,
    bodyLimit: config.bodyLimitBytes,
    // Timeouts chosen on purpose (edge.ts): a slow client is bounded, a kept-alive connection
    // outlives the client pools' own.
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    requestTimeout: REQUEST_TIMEOUT_MS,
    // A request without Host is refused by the Host check (LMSP 2: 421 in the error shape), not
    // by Node's own bare 400.
    http: { headersTimeout: HEADERS_TIMEOUT_MS, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS, requireHostHeader: false },
    clientErrorHandler,
    // A stop (service.ts) closes idle connections at once and lets each request being answered
    // finish, its connection closed after the answer: a create the service committed is always
    // answered (the request that arrives meanwhile on a kept-alive connection too, not a 503 in
    // another shape). Streams and waits end at once (ConnectionRegistry.endAll); the rest are cut
    // after a grace period.
    forceCloseConnections: 'idle',
    return503OnClosing: false,
    ajv: { customOptions: { coerceTypes: false } },
    // A path parameter holds an id. An id of any length reaches its route, so that the token is
    // checked first and the 404 names the id as every other 404 does (no route has a regex
    // parameter, which is what Fastify's default of 100 characters guards); Node refuses a
    // request line longer than its header limit before routing (431).
    routerOptions: { maxParamLength: maxHeaderSize },
    // LMSP 2: what the router refuses before any route runs answers in the LMSP shape too.
    frameworkErrors: (_error, request, reply) => {
      reply.header('x-request-id', request.id);
      countRefusedRequest(metrics, request, reply);
      try {
        // LMSP 2: the Host and Origin checks come before anything else; an allowed page gets CORS.
        const origin = guard?.(request) ?? null;
        if (origin !== null) setCors(reply, origin);
      } catch (refused) {
        return sendError(reply, toServiceError(refused));
      }
      return sendError(reply, invalidRequest(null, 'The URL is not valid: it has a malformed percent-encoding.'));
    },
  });
  const servedNames = allowedHostNames(config.host, config.allowedHosts);
  answerWhatNodeWouldRefuse(app.server, (authority) => servedNames.has(hostName(authority) ?? ''));
  const openFiles = openFileLimit();
  const connections = connectionCap(config.maxConnections, openFiles);
  if (config.maxConnections !== 0 && connections !== null && connections < config.maxConnections) {
    app.log.warn({ max_connections: connections, open_files: openFiles },
      `--max-connections is lowered to ${connections}: the process may open ${openFiles} files, and keeps ${RESERVED_FILES} for itself`);
  }
  capConnections(app.server, connections, () => metrics.countDroppedConnection(),
    (message) => app.log.warn({ max_connections: connections }, message));

  // Bodies are validated strictly (a string is never taken for a number: LMSP section 2 wants
  // a 400 naming the field); query strings are text and are coerced to their declared types.
  const bodyValidator = new Ajv.default({ coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false, strict: false });
  const queryValidator = new Ajv.default({ coerceTypes: true, useDefaults: true, removeAdditional: false, allErrors: false, strict: false });
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart === 'body') return bodyValidator.compile(schema);
    const validate = queryValidator.compile(schema);
    if (httpPart !== 'querystring') return validate;
    const check = queryTextCheck(schema as QuerySchema);
    // Fastify reads a failed validation's errors from the function it was given.
    const checked = Object.assign((data: unknown) => {
      const refusal = check(data as Record<string, unknown>);
      if (refusal) return { error: refusal };
      const valid = validate(data);
      checked.errors = validate.errors;
      return valid;
    }, { errors: null as typeof validate.errors });
    return checked;
  });

  // JSON only (LMSP section 2). An empty body is an empty object, so body-less POSTs (cancel,
  // verify) work with clients that still send `Content-Type: application/json`.
  app.removeAllContentTypeParsers();
  // LMSP 2: bodies are UTF-8. Bytes that are not are refused rather than read as U+FFFD, which
  // would silently change a prompt (JSON text must be UTF-8, RFC 8259).
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const parseJson = (request: FastifyRequest, body: string | Buffer, done: (error: Error | null, value?: unknown) => void) => {
    // A compressed body would be read as if it were plain JSON (RFC 9110 8.4: 415 for a content
    // coding the server does not take).
    const coding = request.headers['content-encoding']?.trim().toLowerCase();
    if (coding && coding !== 'identity') {
      return done(new ServiceError('unsupported_media_type', `Content-Encoding '${coding}' is not supported: send the JSON body unencoded.`), undefined);
    }
    let text: string;
    try {
      text = (typeof body === 'string' ? body : utf8.decode(body)).trim();
    } catch {
      return done(new ServiceError('invalid_json', 'The request body is not valid UTF-8.'), undefined);
    }
    if (text === '') return done(null, {});
    if (jsonDepthExceeds(text)) {
      return done(new ServiceError('invalid_json', `The request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels.`), undefined);
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      return done(new ServiceError('invalid_json', `The request body is not valid JSON: ${(error as Error).message}`), undefined);
    }
    const lone = loneSurrogatePath(text, value);
    if (lone !== null) {
      return done(new ServiceError('invalid_request', 'The string holds a lone surrogate (a \\uD800-\\uDFFF escape without its pair), which is no Unicode character.',
        { param: lone === '' ? null : lone }), undefined);
    }
    done(null, value);
  };
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJson);
  app.addContentTypeParser(JSON_SUFFIX_MEDIA_TYPE, { parseAs: 'buffer' }, parseJson);

  app.setErrorHandler(async (error, request, reply) => {
    // The client left while it sent its body: nobody to answer, and no fault of the service's.
    if ((error as NodeJS.ErrnoException).code === 'ECONNRESET' && request.raw.destroyed) {
      request.log.info({ url: request.url }, 'the client left during its request');
      return reply.code(CLIENT_CLOSED_REQUEST).send();
    }
    // A method that may carry a body (QUERY) sent without Content-Type: Fastify refuses it
    // before any route, the unknown ones included (LMSP 2: never a 5xx for what a client sent).
    const serviceError = (error as FastifyError).code === 'FST_ERR_ROUTE_MISSING_CONTENT_TYPE'
      ? (request.is404 ? noRoute(request) : new ServiceError('unsupported_media_type'))
      : toServiceError(error);
    // The engine failing on a model's file is logged as what it is, not as a bug with its stack.
    if (serviceError.code === 'engine_error') request.log.warn({ url: request.url, error: serviceError.message }, 'the engine failed on this request');
    // A create a stopping service refuses is no failure of its own.
    else if (serviceError.code === 'storage_unavailable' && context.core.stopping) request.log.info({ url: request.url }, 'refused: the service is stopping');
    else if (serviceError.status >= 500) request.log.error({ err: error, url: request.url }, 'request failed');
    // An answer given before the body was read (401, 413, 415, 421, 403, ...) waits until the
    // client has sent it, so that the client reads the answer rather than a broken pipe.
    if (!(await drainRequest(request.raw, DRAIN_FACTOR * config.bodyLimitBytes))) reply.header('connection', 'close');
    return sendError(reply, serviceError);
  });
  app.setNotFoundHandler((request, reply) => sendError(reply, noRoute(request)));

  // Every route declares its access (LMSP section 4); one that forgets fails at startup.
  const routes: RouteEntry[] = [];
  app.addHook('onRoute', (route) => {
    const access = (route.config as { access?: RouteAccess } | undefined)?.access;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.every((method) => method === 'HEAD')) return;
    if (!access) throw new Error(`route ${methods.join(',')} ${route.url} declares no access rule`);
    for (const method of methods) routes.push({ method, url: route.url, access });
  });
  routeTables.set(app, routes);

  // The OpenAPI document is built from the same route schemas that validate requests.
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'lmsp',
        version: SOFTWARE_VERSION,
        description: 'LMSP 1.0: durable, OpenAI-compatible responses from local language models. See docs/api.md.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'A token from POST /v1/pair' } } },
      security: [{ bearer: [] }],
    },
    transform: ({ schema, url, route }) => {
      const { access, answers } = (route.config ?? {}) as { access?: RouteAccess; answers?: RouteAnswers };
      const transformed = { ...(schema ?? {}) } as Record<string, unknown>;
      if (access === 'public') transformed.security = [];
      else if (access && access !== 'authenticated') transformed.description = `Needs the \`${access}\` scope.`;
      // The headers every route of a kind reads (LMSP 8, 7.3), checked before any route runs.
      const methods = [route.method].flat();
      const streams = Object.values(answers ?? {}).some((answer) => typeof answer !== 'string');
      const headers = {
        ...(methods.includes('POST') ? { 'idempotency-key': IDEMPOTENCY_KEY_HEADER } : {}),
        ...(methods.includes('GET') && streams ? { 'last-event-id': LAST_EVENT_ID_HEADER } : {}),
      };
      if (Object.keys(headers).length > 0) transformed.headers = { type: 'object', properties: headers };
      // Only the document: the routes' answers are not serialized through these schemas.
      transformed.response = {
        ...Object.fromEntries(Object.entries(answers ?? { 200: 'OK' }).map(([status, answer]) => [status, typeof answer === 'string' ? { description: answer } : {
          // JSON, or server-sent events when the request asks for a stream.
          description: answer.description,
          content: { 'application/json': { schema: { type: 'object' } }, 'text/event-stream': { schema: { type: 'string' } } },
        }])),
        default: ERROR_ANSWER,
      };
      return { schema: transformed as typeof schema, url };
    },
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // A stopping service closes each connection after its answer (Fastify does so for the requests
  // that arrive once it closes; this covers those it was already answering).
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (context.core.stopping) reply.header('connection', 'close');
    done(null, payload);
  });
  countRequests(app, metrics);
  guard = registerGuards(app, { listenHost: config.host, allowedHosts: config.allowedHosts, allowedOrigins: config.allowedOrigins });
  registerAuth(app, context);
  // LMSP 2: a malformed Last-Event-ID is a 400 wherever it is sent, once the client is known.
  app.addHook('onRequest', async (request) => {
    lastEventIdOf(request);
  });
  // A target that is neither a path nor an absolute URL (`GET *`, `GET v1/service`) names no
  // route: the router would read it as `/` and serve the dashboard.
  app.addHook('onRequest', async (request) => {
    const target = request.raw.url ?? '/';
    if (!target.startsWith('/') && !/^https?:\/\//i.test(target)) {
      throw new ServiceError('not_found', `No route for ${request.method} ${target.split('?')[0]}.`);
    }
  });
  // After every check made on the headers (the hooks above): a client that waits for it is told
  // to send its body.
  app.addHook('preParsing', async (request, reply, payload) => {
    continueRequest(request.raw, reply.raw, config.bodyLimitBytes, request.is404 ? noRoute(request) : null);
    return payload;
  });
  registerMetrics(app, metrics);
  await registerDashboard(app);
  registerServiceRoutes(app, context);
  registerResponseRoutes(app, context);
  registerTaskRoutes(app, context);
  registerModelRoutes(app, context);
  registerPullRoutes(app, context);
  registerClientRoutes(app, context);
  registerEmbeddingRoutes(app, context);
  registerChatCompletionRoutes(app, context);
  return app;
}

export type { FastifyRequest };
