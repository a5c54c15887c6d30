/** Records for store-level tests, built the way the service builds them. */
import { newId } from '../../src/ids.js';
import type { RestartPolicy } from '../../src/tasks/states.js';
import { newTask } from '../../src/tasks/create-response.js';
import type { StoredResponse, Task } from '../../src/tasks/types.js';
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
  const task = newTask(response, options.onRestart ?? 'resume');
  return { response, task };
}
