/**
 * Prometheus metrics (LMSP 15), kept in a registry of the service's own (never prom-client's
 * global one, so two services in one process never mix their figures). Every figure comes from
 * something that happens anyway: the task timeline (after each commit), the database's commit
 * hook, the engine's load hook, the recovery report, and Fastify's onResponse hook. Gauges of
 * stored state are computed at scrape time.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { MODEL_LOAD_RESULTS, type ModelLoadResult } from '../engine/runner-pool.js';
import type { Store } from '../store/index.js';
import type { RecoveryReport } from '../tasks/recovery.js';
import { FINAL_STATUSES, TASK_KINDS, TASK_STATUSES, isFinal, type RecoveryOutcome } from '../domain/tasks.js';

/** What a restart policy can do to a task whose runner died (`TaskMachine.interrupt`). */
const INTERRUPTION_ACTIONS: readonly RecoveryOutcome[] = ['failed', 'cancelled', 'requeued', 'resumed'];
import type { TaskTimeline } from '../tasks/task-timeline.js';
import type { AppContext } from './context.js';

/** Queue waits and first tokens: a few milliseconds on an idle service, minutes behind a queue. */
const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Most requests take milliseconds; a plain create waits for its whole generation. */
const HTTP_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
/** A commit is one fsync: tenths of a millisecond on fast disks, tens on slow ones, more when stalled. */
const COMMIT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];

/** The route label of requests that matched no route: one label, whatever the URL. */
export const UNMATCHED_ROUTE = 'unmatched';

export interface MetricSources {
  store: Store;
  /** Models loaded now; 0 before the engine exists. */
  loadedModels: () => number;
}

export class ServiceMetrics {
  readonly registry = new Registry();
  private openStreams: () => number = () => 0;
  private readonly httpRequests;
  private readonly httpDuration;
  private readonly tasksFinished;
  private readonly queueWait;
  private readonly firstToken;
  private readonly generatedTokens;
  private readonly modelLoads;
  private readonly commitDuration;
  private readonly recovered;
  private readonly interrupted;
  private readonly droppedConnections;

  constructor(sources: MetricSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.httpRequests = new Counter({
      name: 'lmsp_http_requests_total', help: 'HTTP requests answered, by method, route pattern and status.',
      labelNames: ['method', 'route', 'status'] as const, registers,
    });
    this.httpDuration = new Histogram({
      name: 'lmsp_http_request_duration_seconds', help: 'Time from a request to the end of its answer (streams: until they close).',
      labelNames: ['method', 'route'] as const, buckets: HTTP_BUCKETS, registers,
    });
    new Gauge({
      name: 'lmsp_tasks', help: 'Stored tasks by kind and status.', labelNames: ['kind', 'status'] as const, registers,
      collect() {
        this.reset();
        const rows = sources.store.taskCounts.byKindAndStatus();
        // Every status of every kind is reported, zeros included, so rates and alerts
        // see a series that exists before its first task.
        for (const kind of new Set<string>([...TASK_KINDS, ...rows.map((row) => row.kind)])) {
          for (const status of TASK_STATUSES) this.set({ kind, status }, 0);
        }
        for (const row of rows) this.set({ kind: row.kind, status: row.status }, row.count);
      },
    });
    this.tasksFinished = new Counter({
      name: 'lmsp_tasks_finished_total', help: 'Tasks that reached a final status in this process, by kind and status.',
      labelNames: ['kind', 'status'] as const, registers,
    });
    // Zeros from the start, as for lmsp_tasks: a rate needs the series before its first increase.
    for (const kind of TASK_KINDS) for (const status of FINAL_STATUSES) this.tasksFinished.inc({ kind, status }, 0);
    this.queueWait = new Histogram({
      name: 'lmsp_queue_wait_seconds', help: 'From a task\'s creation (or its requeue after a restart) to its start.',
      buckets: WAIT_BUCKETS, registers,
    });
    this.firstToken = new Histogram({
      name: 'lmsp_time_to_first_token_seconds', help: 'From a task becoming running to its first committed output.',
      buckets: WAIT_BUCKETS, registers,
    });
    this.generatedTokens = new Counter({
      name: 'lmsp_generated_tokens_total', help: 'Output tokens generated and committed, by model.', labelNames: ['model'] as const, registers,
    });
    this.modelLoads = new Counter({
      name: 'lmsp_model_loads_total', help: 'Model loads by model and result (loaded, failed, cancelled).',
      labelNames: ['model', 'result'] as const, registers,
    });
    new Gauge({
      name: 'lmsp_models_loaded', help: 'Models loaded in runners now.', registers,
      collect() {
        this.set(sources.loadedModels());
      },
    });
    const openStreams = () => this.openStreams();
    new Gauge({
      name: 'lmsp_open_streams', help: 'Open server-sent event streams.', registers,
      collect() {
        this.set(openStreams());
      },
    });
    this.commitDuration = new Histogram({
      name: 'lmsp_db_commit_duration_seconds', help: 'Database write transactions, BEGIN to durable COMMIT.',
      buckets: COMMIT_BUCKETS, registers,
    });
    this.recovered = new Counter({
      name: 'lmsp_recovered_tasks_total', help: 'Unfinished tasks found at startup, by what recovery did (LMSP 11.3).',
      labelNames: ['action'] as const, registers,
    });
    this.interrupted = new Counter({
      name: 'lmsp_interrupted_tasks_total',
      help: 'Tasks whose runner process died under them while the service ran, by what their restart policy did (LMSP 7.5).',
      labelNames: ['action'] as const, registers,
    });
    for (const action of INTERRUPTION_ACTIONS) this.interrupted.inc({ action }, 0);
    this.droppedConnections = new Counter({
      name: 'lmsp_http_connections_dropped_total',
      help: 'New connections closed at once because --max-connections were open.', registers,
    });
  }

  countDroppedConnection(): void {
    this.droppedConnections.inc();
  }

  /** Follows the task timeline: finished tasks, queue waits, first tokens, generated tokens. */
  watch(timeline: TaskTimeline): () => void {
    return timeline.listen({
      statusChanged: ({ task, to }) => {
        if (isFinal(to)) this.tasksFinished.inc({ kind: task.kind, status: to });
      },
      queueWaited: (_task, seconds) => this.queueWait.observe(seconds),
      firstOutput: (_task, seconds) => this.firstToken.observe(seconds),
      tokensGenerated: (task, count) => this.generatedTokens.inc({ model: task.model }, count),
    });
  }

  /**
   * A model removed from the registry takes its series with it: an id that no longer names a
   * model would otherwise stay in every scrape until a restart (one series per id ever used).
   * Removal waits for its unfinished tasks (409 `model_in_use`), so nothing counts on it later.
   */
  forgetModel(model: string): void {
    this.generatedTokens.remove({ model });
    for (const result of MODEL_LOAD_RESULTS) this.modelLoads.remove({ model, result });
  }

  observeCommit(seconds: number): void {
    this.commitDuration.observe(seconds);
  }

  observeModelLoad(model: string, result: ModelLoadResult): void {
    this.modelLoads.inc({ model, result });
  }

  /** A task's runner process died under it; `action` is what its restart policy did. */
  observeInterruption(action: RecoveryOutcome): void {
    this.interrupted.inc({ action });
  }

  observeRecovery(report: RecoveryReport): void {
    for (const action of ['failed', 'cancelled', 'requeued', 'resumed', 'unchanged'] as const) {
      this.recovered.inc({ action }, report[action]);
    }
  }

  observeRequest(method: string, route: string, status: number, seconds: number): void {
    this.httpRequests.inc({ method, route, status: String(status) });
    this.httpDuration.observe({ method, route }, seconds);
  }

  /** The open-stream count of the app that serves the metrics. */
  countStreams(openStreams: () => number): void {
    this.openStreams = openStreams;
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

/** Metrics of an app built without the service around it (tests): HTTP and stored tasks only. */
export function metricsOf(context: AppContext): ServiceMetrics {
  const metrics = context.metrics ?? new ServiceMetrics({ store: context.core.store, loadedModels: () => context.core.engine.loadedModelIds().size });
  metrics.countStreams(() => context.connections.openStreams);
  return metrics;
}

/** The status a request is counted with whose client left before any answer (nginx's convention). */
export const CLIENT_CLOSED_REQUEST = 499;

/**
 * Counts a request once its connection is done with it, whether the answer ended or the client
 * left first (an event stream it closed, a plain create it abandoned): Fastify's `onResponse`
 * runs only for the first. `route` is the route pattern, never the raw URL, so ids make no series.
 */
function countWhenClosed(metrics: ServiceMetrics, request: FastifyRequest, reply: FastifyReply, route: string): void {
  const started = performance.now();
  reply.raw.once('close', () => {
    const status = reply.raw.headersSent ? reply.raw.statusCode : CLIENT_CLOSED_REQUEST;
    const seconds = (performance.now() - started) / 1000;
    metrics.observeRequest(request.method, route, status, seconds);
    // `--log-level debug`: one line per request, by its route (never its URL, which may carry ids or text).
    request.log.debug({ method: request.method, route, status, ms: Math.round(seconds * 1000) }, 'request answered');
  });
}

/**
 * Counts an answer the router gives before any route matched (a malformed percent-encoding):
 * Fastify runs no hooks for those.
 */
export function countRefusedRequest(metrics: ServiceMetrics, request: FastifyRequest, reply: FastifyReply): void {
  countWhenClosed(metrics, request, reply, UNMATCHED_ROUTE);
}

/** Counts every request that reaches the hooks; registered before any other hook, so refusals count too. */
export function countRequests(app: FastifyInstance, metrics: ServiceMetrics): void {
  app.addHook('onRequest', async (request, reply) => {
    countWhenClosed(metrics, request, reply, request.routeOptions.url ?? UNMATCHED_ROUTE);
  });
}

/** `GET /metrics` (scope `metrics`, or `admin`). */
export function registerMetrics(app: FastifyInstance, metrics: ServiceMetrics): void {
  app.get('/metrics', { config: { access: 'metrics' }, schema: { hide: true } }, async (_request, reply) => {
    reply.header('content-type', metrics.contentType).header('cache-control', 'no-store');
    return metrics.text();
  });
}
