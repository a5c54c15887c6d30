/** What the HTTP layer is given to work with; built once by the service (service.ts). */
import type { Logger } from 'pino';
import type { FailureRateLimiter } from '../auth/rate-limit.js';
import type { Client, Scope } from '../auth/types.js';
import type { ServiceConfig } from '../config.js';
import type { Engine } from '../engine/engine.js';
import type { ModelRegistry } from '../models/registry.js';
import type { Store } from '../store/index.js';
import type { TaskEventBus } from '../tasks/event-bus.js';
import type { Scheduler } from '../tasks/scheduler.js';
import type { ServiceMetrics } from './metrics.js';

export interface AppServices {
  config: ServiceConfig;
  serviceId: string;
  store: Store;
  registry: ModelRegistry;
  engine: Engine;
  scheduler: Scheduler;
  bus: TaskEventBus;
  pairingLimiter: FailureRateLimiter;
  logger: Logger | false;
  /** Milliseconds between SSE keep-alive comments (LMSP 7.3: 15 s). */
  heartbeatMs: number;
  /** The service's metrics (LMSP 15); an app built without them counts HTTP and stored tasks only. */
  metrics?: ServiceMetrics;
}

/** What a route requires: a scope, any valid token, or nothing (LMSP section 4). */
export type RouteAccess = Scope | 'authenticated' | 'public';

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: RouteAccess;
  }
  interface FastifyRequest {
    client: Client | null;
  }
}
