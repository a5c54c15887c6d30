/** Tasks of kind `response` (LMSP section 6): their events are the OpenAI Responses stream's. */
import { RESPONSE_TEXT_DELTA, responseEvents } from '../api/response-events.js';
import {
  closeToolOutput, finishedCalls, liveToolOutputItems, toolOutputEvents, toolResponseEvent,
} from '../api/response-tool-events.js';
import { finishedToolItems } from '../api/views.js';
import { promptMessages, type ResponseHeader } from '../domain/responses.js';
import { responseIdOf, type EventDraft, type Task, type TaskStatus } from '../domain/tasks.js';
import type { Store } from '../store/index.js';
import { outputConstraintOf } from './response-format.js';
import { ToolOutputCache } from './response-tool-output.js';
import { withOutput, type TaskKindHandler } from './task-machine.js';

/** A response given tools has items announced as they come (LMSP 6.2); one without keeps its single message. */
export function hasTools(header: Pick<ResponseHeader, 'tools'>): boolean {
  return (header.tools?.length ?? 0) > 0;
}

export function responseKind(store: Store, toolOutput = new ToolOutputCache(store)): TaskKindHandler<ResponseHeader> {
  const taskOf = (header: ResponseHeader): Task => {
    const task = store.tasks.getByResponse(header.id);
    if (!task) throw new Error(`the task of response ${header.id} is missing`);
    return task;
  };
  /** An event carrying the response with its items so far, as they are once the task is `status`. */
  const withItems = (type: string, header: ResponseHeader, text: string, status: TaskStatus, withTokens = false): EventDraft => {
    const task = taskOf(header);
    return toolResponseEvent(type, header, text, liveToolOutputItems(header, toolOutput.get(task), { status }), withTokens);
  };

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
    outputTexts: (tasks) => store.events.outputTexts(withOutput(tasks), RESPONSE_TEXT_DELTA),
    generation(task: Task) {
      const response = store.responses.get(responseIdOf(task));
      if (!response) throw new Error(`response ${responseIdOf(task)} of task ${task.id} is missing`);
      return {
        messages: promptMessages(response),
        sampling: { temperature: response.temperature, topP: response.topP, seed: response.seed, maxOutputTokens: response.maxOutputTokens },
        ...outputConstraintOf(response),
      };
    },
    finalized(header, task, text) {
      // The final text is kept on the response; while the task ran it lived in its deltas.
      if (text !== '') store.responses.setOutputText(responseIdOf(task), text);
      if (hasTools(header)) {
        store.responses.setOutputCalls(header.id, finishedCalls(header, toolOutput.get(task)));
        toolOutput.forget(task.id);
      }
    },
    events: {
      created: (header) => responseEvents.created(header),
      loading: (header) => responseEvents.loading(header),
      running: (header) => (hasTools(header) ? [toolResponseEvent('response.in_progress', header, '', [])] : responseEvents.running(header)),
      output: (header, text, tokens, units, task) => {
        if (!hasTools(header)) return responseEvents.delta(header, text, tokens);
        const drafts = toolOutputEvents(header, toolOutput.get(task), units, tokens);
        toolOutput.wrote(task, drafts.length);
        return drafts;
      },
      finished: (header, text, finishReason, toolCalls) => {
        if (!hasTools(header)) return responseEvents.finished(header, text, finishReason);
        const task = taskOf(header);
        const state = toolOutput.get(task);
        const drafts = closeToolOutput(header, state, finishReason, toolCalls);
        const ended = { ...task, status: 'completed' as const, finishReason };
        const items = finishedToolItems(header, ended, text, finishedCalls(header, state));
        drafts.push(toolResponseEvent(finishReason === 'max_output_tokens' ? 'response.incomplete' : 'response.completed', header, text, items));
        toolOutput.wrote(task, drafts.length);
        return drafts;
      },
      failed: (header, text) => (hasTools(header) ? [withItems('response.failed', header, text, 'failed')] : responseEvents.failed(header, text)),
      cancelling: (header, text) => (hasTools(header) ? [withItems('response.cancelling', header, text, 'cancelling')] : responseEvents.cancelling(header, text)),
      cancelled: (header, text) => (hasTools(header) ? [withItems('response.cancelled', header, text, 'cancelled')] : responseEvents.cancelled(header, text)),
      requeued: (header, text) => (hasTools(header) ? [toolResponseEvent('response.queued', header, text, [])] : responseEvents.requeued(header, text)),
      resumed: (header, text) => (hasTools(header) ? [withItems('response.resumed', header, text, 'running', true)] : responseEvents.resumed(header, text)),
    },
  };
}
