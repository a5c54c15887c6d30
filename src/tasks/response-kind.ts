/** Tasks of kind `response` (LMSP section 6): their events are the OpenAI Responses stream's. */
import { RESPONSE_TEXT_DELTA, responseEvents } from '../api/response-events.js';
import { promptMessages, type ResponseHeader } from '../domain/responses.js';
import { responseIdOf, type Task } from '../domain/tasks.js';
import type { Store } from '../store/index.js';
import { outputConstraintOf } from './response-format.js';
import type { TaskKindHandler } from './task-machine.js';

export function responseKind(store: Store): TaskKindHandler<ResponseHeader> {
  return {
    kind: 'response',
    load(task: Task): ResponseHeader {
      const header = store.responses.getHeader(responseIdOf(task));
      if (!header) throw new Error(`response ${responseIdOf(task)} of task ${task.id} is missing`);
      return header;
    },
    outputText(task: Task): string {
      // No token in this attempt means no delta to read (recovery of many idle tasks skips the query).
      return task.outputTokens === 0 ? '' : store.events.outputText(task.id, task.outputStartSeq, RESPONSE_TEXT_DELTA);
    },
    generation(task: Task) {
      const response = store.responses.get(responseIdOf(task));
      if (!response) throw new Error(`response ${responseIdOf(task)} of task ${task.id} is missing`);
      return {
        messages: promptMessages(response),
        sampling: { temperature: response.temperature, topP: response.topP, seed: response.seed, maxOutputTokens: response.maxOutputTokens },
        ...outputConstraintOf(response),
      };
    },
    finalized(_header, task, text) {
      // The final text is kept on the response; while the task ran it lived in its deltas.
      if (text !== '') store.responses.setOutputText(responseIdOf(task), text);
    },
    events: {
      created: (header) => responseEvents.created(header),
      loading: (header) => responseEvents.loading(header),
      running: (header) => responseEvents.running(header),
      output: (header, text, tokens) => responseEvents.delta(header, text, tokens),
      finished: (header, text, finishReason) => responseEvents.finished(header, text, finishReason),
      failed: (header, text) => responseEvents.failed(header, text),
      cancelling: (header, text) => responseEvents.cancelling(header, text),
      cancelled: (header, text) => responseEvents.cancelled(header, text),
      requeued: (header, text) => responseEvents.requeued(header, text),
      resumed: (header, text) => responseEvents.resumed(header, text),
    },
  };
}
