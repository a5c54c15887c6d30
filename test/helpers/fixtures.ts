/** Records for store-level tests, built and written the way the service builds and writes them. */
import type { StoredResponse } from '../../src/domain/responses.js';
import type { RestartPolicy, Task } from '../../src/domain/tasks.js';
import { newId } from '../../src/ids.js';
import type { Store, WriteContext } from '../../src/store/index.js';
import { newTaskMachine } from '../../src/tasks/core.js';
import { newResponseTask } from '../../src/tasks/prepare-response.js';
import { insertResponse } from '../../src/tasks/responses.js';
import type { TaskMachine } from '../../src/tasks/task-machine.js';
import { nowSeconds } from '../../src/time.js';

export function makeResponseAndTask(options: { clientId?: string; model?: string; onRestart?: RestartPolicy; store?: boolean; createdAt?: number } = {}): { response: StoredResponse; task: Task } {
  const createdAt = options.createdAt ?? nowSeconds();
  const response: StoredResponse = {
    id: newId('resp'),
    clientId: options.clientId ?? 'cli_test',
    model: options.model ?? 'lmsp-tiny',
    createdAt,
    background: true,
    stream: false,
    store: options.store ?? true,
    instructions: null,
    previousResponseId: null,
    maxOutputTokens: 16,
    temperature: 1,
    topP: 1,
    seed: 42,
    metadata: {},
    inputItems: [{ id: newId('msg'), type: 'message', role: 'user', status: 'completed', content: [{ type: 'input_text', text: 'hi' }] }],
    context: [{ role: 'user', content: 'hi' }],
    outputItemId: newId('msg'),
    outputText: null,
  };
  const task = newResponseTask(response, options.onRestart ?? 'resume');
  return { response, task };
}

const machines = new WeakMap<Store, TaskMachine>();

/** The task state machine over `store` (one per store). */
export function machineOf(store: Store): TaskMachine {
  let machine = machines.get(store);
  if (!machine) {
    machine = newTaskMachine(store);
    machines.set(store, machine);
  }
  return machine;
}

/** Writes a response and its task as a create does, in the caller's transaction. */
export function insertResponseTask(store: Store, context: WriteContext, response: StoredResponse, task: Task): Task {
  return insertResponse({ store, machine: machineOf(store) }, context, response, task);
}
