/**
 * The task core: what the use cases work with. The service builds one with an engine; the CLI,
 * working on a data directory whose service is stopped, builds one without.
 */
import type { Engine } from '../engine/engine.js';
import type { ModelRegistry } from '../models/registry.js';
import type { Store } from '../store/index.js';
import type { TaskEventBus } from './event-bus.js';
import { chatCompletionKind } from './chat-completion-kind.js';
import { pullKind } from './pull-kind.js';
import { responseKind } from './response-kind.js';
import { TaskMachine } from './task-machine.js';

export interface TaskCore {
  store: Store;
  machine: TaskMachine;
  registry: ModelRegistry;
  engine: Engine;
  bus: TaskEventBus;
  /** The data directory's key for pairing codes (auth/pairing-key.ts). */
  pairingKey: Buffer;
  /**
   * Set once the service begins to stop: the connections it then closes are not clients that
   * left, and their tasks stay as they are on disk for their restart policies, as after a crash.
   */
  stopping: boolean;
}

/** The state machine with every kind of task this build serves. */
export function newTaskMachine(store: Store): TaskMachine {
  return new TaskMachine(store).register(responseKind(store)).register(chatCompletionKind(store)).register(pullKind(store));
}
