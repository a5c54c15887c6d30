/**
 * The events of a response's task (LMSP 7.3), in the order of the OpenAI Responses stream, so the
 * `openai` package's stream helpers work unchanged. Pure functions: each returns the drafts that
 * the store appends in the transaction of the status change they belong to; a payload is built
 * from the task as it is after that change, with the event's own sequence number.
 */
import type { ResponseHeader } from '../domain/responses.js';
import { isIncomplete, type EventDraft, type FinishReason } from '../domain/tasks.js';
import { outputTextPart, toResponseObject } from './views.js';

/** The event that carries generated text, and where in its payload the text is. */
export const RESPONSE_TEXT_DELTA = { type: 'response.output_text.delta', path: '$.delta' } as const;

/** Event types after which nothing more is written to a response's log. */
export const RESPONSE_TERMINAL_EVENTS = ['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled'] as const;

const OUTPUT_INDEX = 0;
const CONTENT_INDEX = 0;

/** An event whose payload is the response object, with the text it has at that point. */
function withResponse(type: string, header: ResponseHeader, text: string): EventDraft {
  return { type, payload: (task) => ({ response: toResponseObject(header, task, text) }) };
}

/**
 * An event written before this attempt's output message is announced (loading, in progress): as
 * in the OpenAI stream, its response has `output: []`, so that the item appears first with
 * `response.output_item.added`, and a client applying item events to it never holds it twice.
 */
function beforeOutput(type: string, header: ResponseHeader): EventDraft {
  return { type, payload: (task) => ({ response: toResponseObject(header, task, '', []) }) };
}

function ids(header: ResponseHeader) {
  return { item_id: header.outputItemId, output_index: OUTPUT_INDEX, content_index: CONTENT_INDEX };
}

export const responseEvents = {
  /** `response.created`: the task exists, queued (LMSP 11.2: in the transaction that creates it). */
  created: (header: ResponseHeader): EventDraft[] => [withResponse('response.created', header, '')],

  loading: (header: ResponseHeader): EventDraft[] => [beforeOutput('response.loading', header)],

  /** Running, with the output message and its text part announced before any delta. */
  running: (header: ResponseHeader): EventDraft[] => [
    beforeOutput('response.in_progress', header),
    {
      type: 'response.output_item.added',
      payload: () => ({
        output_index: OUTPUT_INDEX,
        item: { type: 'message', id: header.outputItemId, role: 'assistant', status: 'in_progress', content: [] },
      }),
    },
    {
      type: 'response.content_part.added',
      payload: () => ({ ...ids(header), part: outputTextPart('') }),
    },
  ],

  /** Generated text with the token ids that produced it (the resume snapshot, LMSP 7.5). */
  delta: (header: ResponseHeader, text: string, tokens: readonly number[]): EventDraft[] => [{
    type: RESPONSE_TEXT_DELTA.type,
    tokens,
    payload: () => ({ ...ids(header), delta: text, logprobs: [] }),
  }],

  /** The closing events of the text, its part, its message and the response. */
  finished: (header: ResponseHeader, text: string, finishReason: FinishReason): EventDraft[] => {
    const part = outputTextPart(text);
    const incomplete = isIncomplete(finishReason);
    return [
      { type: 'response.output_text.done', payload: () => ({ ...ids(header), text, logprobs: [] }) },
      { type: 'response.content_part.done', payload: () => ({ ...ids(header), part }) },
      {
        type: 'response.output_item.done',
        payload: () => ({
          output_index: OUTPUT_INDEX,
          item: { type: 'message', id: header.outputItemId, role: 'assistant', status: incomplete ? 'incomplete' : 'completed', content: [part] },
        }),
      },
      withResponse(incomplete ? 'response.incomplete' : 'response.completed', header, text),
    ];
  },

  failed: (header: ResponseHeader, text: string): EventDraft[] => [withResponse('response.failed', header, text)],
  cancelling: (header: ResponseHeader, text: string): EventDraft[] => [withResponse('response.cancelling', header, text)],
  cancelled: (header: ResponseHeader, text: string): EventDraft[] => [withResponse('response.cancelled', header, text)],
  /** Queued again after a restart (LMSP 7.5); under retry the earlier output is dropped. */
  requeued: (header: ResponseHeader, text: string): EventDraft[] => [withResponse('response.queued', header, text)],
  /** Continued from its snapshot after a restart (LMSP 7.5). */
  resumed: (header: ResponseHeader, text: string): EventDraft[] => [{
    type: 'response.resumed',
    payload: (task) => ({ response: toResponseObject(header, task, text), output_tokens: task.outputTokens }),
  }],
};
