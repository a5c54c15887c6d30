/** Records for store-level tests, built the way the service builds them. */
import { newId } from '../../src/ids.js';
import type { RestartPolicy } from '../../src/tasks/states.js';
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
  const task: Task = {
    seq: 0,
    id: newId('task'),
    kind: 'response',
    responseId: response.id,
    clientId: response.clientId,
    model: response.model,
    status: 'queued',
    onRestart: options.onRestart ?? 'resume',
    attempt: 1,
    restarts: 0,
    createdAt,
    startedAt: null,
    finishedAt: null,
    lastSequenceNumber: 0,
    outputStartSeq: 0,
    inputTokens: null,
    outputTokens: 0,
    finishReason: null,
    error: null,
  };
  return { response, task };
}
