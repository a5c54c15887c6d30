/** The Fastify app built in-process on a real database, for tests that use app.inject(). */
import type { FastifyInstance } from 'fastify';
import { FailureRateLimiter } from '../../src/auth/rate-limit.js';
import { ensureOperatorToken } from '../../src/auth/clients.js';
import { loadPairingKey } from '../../src/auth/pairing-key.js';
import { resolveConfig } from '../../src/config.js';
import type { Engine } from '../../src/engine/engine.js';
import { RunnerPool } from '../../src/engine/runner-pool.js';
import { buildApp } from '../../src/http/app.js';
import { ConnectionRegistry } from '../../src/http/connections.js';
import { ModelRegistry } from '../../src/models/registry.js';
import { Store } from '../../src/store/index.js';
import { newTaskMachine } from '../../src/tasks/core.js';
import { TaskEventBus } from '../../src/tasks/event-bus.js';
import { Scheduler } from '../../src/tasks/scheduler.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestAppOptions {
  /** The engine the tasks run on, made from the real pool (to time a step of it, say). */
  engine?: (pool: RunnerPool) => Engine;
}

export async function buildTestApp(dataDir: string, env: Record<string, string> = {}, options: TestAppOptions = {}): Promise<{ app: FastifyInstance; store: Store; scheduler: Scheduler; operatorToken: string; close: () => Promise<void> }> {
  const config = resolveConfig({ dataDirFlag: dataDir, env });
  const bus = new TaskEventBus();
  const store = Store.open(dataDir, { notifier: bus });
  const registry = new ModelRegistry(store, config.modelsDir);
  await registry.ensureBuiltin();
  ensureOperatorToken(store, dataDir);
  const pool = new RunnerPool({ slots: 1, maxLoadedModels: 1, keepAliveMs: 1000, settings: { gpu: 'cpu', threads: 1, stateDir: join(dataDir, 'state'), tokenDelayMs: 0 }, debug: config.debug });
  const silentLog = { info: () => {}, warn: () => {}, error: () => {} };
  const engine = options.engine?.(pool) ?? pool;
  const core = { store, machine: newTaskMachine(store), registry, engine, bus, pairingKey: loadPairingKey(dataDir), stopping: false };
  const scheduler = new Scheduler(core, { parallel: 1, maxRestarts: config.maxRestarts, log: silentLog });
  const app = await buildApp({
    config, serviceId: store.db.transaction(() => store.config.ensureServiceId()), core, scheduler,
    connections: new ConnectionRegistry({ perClient: config.maxStreamsPerClient, total: config.maxStreams }),
    pairingLimiter: new FailureRateLimiter(), logger: false, heartbeatMs: 15_000,
  });
  await app.ready();
  return {
    app,
    store,
    scheduler,
    operatorToken: readFileSync(join(dataDir, 'operator.token'), 'utf8').trim(),
    close: async () => {
      await app.close();
      await scheduler.stop();
      await pool.close();
      await store.close();
    },
  };
}
