/** What the HTTP layer works with; built once by the service (src/service.ts). */
import type { Logger } from 'pino';
import type { FailureRateLimiter } from '../auth/rate-limit.js';
import type { ServiceConfig } from '../config.js';
import type { Client, Scope } from '../domain/clients.js';
import type { ConnectionRegistry } from './connections.js';
import type { TaskCore } from '../tasks/core.js';
import type { Scheduler } from '../tasks/scheduler.js';
import type { PullWorkers } from '../tasks/pull-worker.js';
import type { ServiceMetrics } from './metrics.js';

export interface AppContext {
  config: ServiceConfig;
  serviceId: string;
  core: TaskCore;
  scheduler: Scheduler;
  pairingLimiter: FailureRateLimiter;
  /** Open streams and connection-bound requests, per client (LMSP 4, 16). */
  connections: ConnectionRegistry;
  logger: Logger | false;
  /** Milliseconds between SSE keep-alive comments (LMSP 7.3: 15 s). */
  heartbeatMs: number;
  /** The service's metrics (LMSP 15); an app built without them counts HTTP and stored tasks only. */
  metrics?: ServiceMetrics;
  /** The model pull workers (LMSP 5.1); an app built without them does not serve POST /v1/models/pull. */
  pulls?: PullWorkers;
}

/** What a route requires: a scope, any valid token, or nothing (LMSP section 4). */
export type RouteAccess = Scope | 'authenticated' | 'public';

/**
 * A route's successful answers for the OpenAPI document, by status; absent: 200 alone. Errors
 * are in the LMSP shape on every route (section 9) and documented once for all.
 */
export type RouteAnswers = Partial<Record<200 | 201 | 202, string | { description: string; stream: true }>>;

/** A cancel's answers (LMSP 7.4), on tasks and on responses alike. */
export const CANCEL_ANSWERS: RouteAnswers = {
  200: 'Cancelled, now or before',
  202: 'Cancelling: the worker is stopping',
};

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: RouteAccess;
    answers?: RouteAnswers;
  }
  interface FastifyRequest {
    client: Client | null;
  }
}
