/**
 * The events of a response that was given tools (LMSP 6.2, 7.3), in the order of the OpenAI
 * Responses stream: each output item (the message, then each function call) is announced when
 * its first piece is generated and closed before the next one starts. The message's events appear
 * only when there is message text. Pure functions over a `ToolOutputState`, which the task layer
 * keeps (and rebuilds from the log after a restart) and which these functions advance.
 */
import { createHash } from 'node:crypto';
import type { FunctionCallOutput, ResponseHeader } from '../domain/responses.js';
import { isIncomplete, type EventDraft, type FinishReason, type Task } from '../domain/tasks.js';
import type { FunctionCallItem, OutputMessage } from './types.js';
import { RESPONSE_TEXT_DELTA } from './response-events.js';
import { outputTextPart, toResponseObject } from './views.js';

/** Carries the tokens of the model's call syntax (not part of any item) when nothing else does (LMSP). */
export const RESPONSE_CALL_SYNTAX = 'response.function_call_syntax';

/** A piece of generated output, as the engine reports it (its OutputUnit; api/ does not import the engine). */
export interface GeneratedPiece {
  text: string;
  toolCalls?: ReadonlyArray<{ index: number; name: string; arguments: string }>;
}

/** What a response's current attempt has produced so far: its message and its calls. */
export interface ToolOutputState {
  attempt: number;
  message: 'none' | 'open' | 'closed';
  text: string;
  calls: Array<{ name: string; arguments: string; done: boolean; status?: 'completed' | 'incomplete' }>;
}

export function emptyToolOutput(attempt: number): ToolOutputState {
  return { attempt, message: 'none', text: '', calls: [] };
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * The ids of call `index` of a response's attempt: derived, not drawn, so that the event that
 * announces a call, the finished response and a resumed generation all agree on them.
 */
export function functionCallIds(responseId: string, attempt: number, index: number): { id: string; callId: string } {
  const derived = (label: string): string => {
    const digest = createHash('sha256').update(`${label}:${responseId}:${attempt}:${index}`).digest();
    let suffix = '';
    for (let i = 0; i < 24; i++) suffix += BASE62[digest[i]! % 62];
    return suffix;
  };
  return { id: `fc_${derived('fc')}`, callId: `call_${derived('call')}` };
}

function callIndexOffset(state: ToolOutputState): number {
  return state.message === 'none' ? 0 : 1;
}

function messageItem(header: ResponseHeader, text: string, status: OutputMessage['status']): OutputMessage {
  return { type: 'message', id: header.outputItemId, role: 'assistant', status, content: [outputTextPart(text)] };
}

function callItem(header: ResponseHeader, state: ToolOutputState, index: number, status: FunctionCallItem['status']): FunctionCallItem {
  const call = state.calls[index]!;
  const ids = functionCallIds(header.id, state.attempt, index);
  return { type: 'function_call', id: ids.id, call_id: ids.callId, name: call.name, arguments: call.arguments, status };
}

const textIds = (header: ResponseHeader) => ({ item_id: header.outputItemId, output_index: 0, content_index: 0 });

function closeMessage(header: ResponseHeader, state: ToolOutputState, status: OutputMessage['status']): EventDraft[] {
  if (state.message !== 'open') return [];
  state.message = 'closed';
  const text = state.text;
  const part = outputTextPart(text);
  return [
    { type: 'response.output_text.done', payload: () => ({ ...textIds(header), text, logprobs: [] }) },
    { type: 'response.content_part.done', payload: () => ({ ...textIds(header), part }) },
    { type: 'response.output_item.done', payload: () => ({ output_index: 0, item: messageItem(header, text, status) }) },
  ];
}

function closeCall(header: ResponseHeader, state: ToolOutputState, index: number, status: FunctionCallItem['status']): EventDraft[] {
  const call = state.calls[index];
  if (!call || call.done) return [];
  call.done = true;
  call.status = status === 'incomplete' ? 'incomplete' : 'completed';
  const item = callItem(header, state, index, status);
  const outputIndex = callIndexOffset(state) + index;
  return [
    { type: 'response.function_call_arguments.done', payload: () => ({ item_id: item.id, output_index: outputIndex, name: item.name, arguments: item.arguments }) },
    { type: 'response.output_item.done', payload: () => ({ output_index: outputIndex, item }) },
  ];
}

/**
 * Generated output: message text and call pieces, in order, as their events. The batch's token
 * ids (the resume snapshot, LMSP 7.5) ride on its first event; tokens of call syntax alone get
 * an event of their own, so that every committed token is in the log.
 */
export function toolOutputEvents(header: ResponseHeader, state: ToolOutputState, units: readonly GeneratedPiece[], tokens: readonly number[]): EventDraft[] {
  const drafts: EventDraft[] = [];
  for (const unit of units) {
    if (unit.text !== '') {
      if (state.message === 'none') {
        state.message = 'open';
        drafts.push(
          { type: 'response.output_item.added', payload: () => ({ output_index: 0, item: { ...messageItem(header, '', 'in_progress'), content: [] } }) },
          { type: 'response.content_part.added', payload: () => ({ ...textIds(header), part: outputTextPart('') }) },
        );
      }
      state.text += unit.text;
      const delta = unit.text;
      drafts.push({ type: RESPONSE_TEXT_DELTA.type, payload: () => ({ ...textIds(header), delta, logprobs: [] }) });
    }
    for (const piece of unit.toolCalls ?? []) {
      if (piece.index >= state.calls.length) {
        drafts.push(...closeMessage(header, state, 'completed'));
        state.calls.forEach((_, index) => drafts.push(...closeCall(header, state, index, 'completed')));
        state.calls[piece.index] = { name: piece.name, arguments: '', done: false };
        const item = { ...callItem(header, state, piece.index, 'in_progress'), arguments: '' };
        const outputIndex = callIndexOffset(state) + piece.index;
        drafts.push({ type: 'response.output_item.added', payload: () => ({ output_index: outputIndex, item }) });
      }
      if (piece.arguments !== '') {
        state.calls[piece.index]!.arguments += piece.arguments;
        const { id } = functionCallIds(header.id, state.attempt, piece.index);
        const outputIndex = callIndexOffset(state) + piece.index;
        const delta = piece.arguments;
        drafts.push({ type: 'response.function_call_arguments.delta', payload: () => ({ item_id: id, output_index: outputIndex, delta }) });
      }
    }
  }
  if (tokens.length === 0) return drafts;
  if (drafts.length === 0) return [{ type: RESPONSE_CALL_SYNTAX, tokens, payload: () => ({ token_count: tokens.length }) }];
  drafts[0] = { ...drafts[0]!, tokens };
  return drafts;
}

/** The closing events of every open item, in order, once the generation has ended. */
export function closeToolOutput(header: ResponseHeader, state: ToolOutputState, finishReason: FinishReason | null,
  finalCalls: ReadonlyArray<{ status: 'completed' | 'incomplete' }> = []): EventDraft[] {
  const incomplete = finishReason === null || isIncomplete(finishReason);
  const drafts = closeMessage(header, state, incomplete && state.calls.length === 0 ? 'incomplete' : 'completed');
  state.calls.forEach((_, index) => {
    const status = finishReason === null ? 'incomplete' : finalCalls[index]?.status ?? (incomplete ? 'incomplete' : 'completed');
    drafts.push(...closeCall(header, state, index, status));
  });
  return drafts;
}

/** The calls as the finished response keeps them: a call never closed is incomplete. */
export function finishedCalls(header: ResponseHeader, state: ToolOutputState): FunctionCallOutput[] {
  return state.calls.map((call, index) => {
    const ids = functionCallIds(header.id, state.attempt, index);
    return { id: ids.id, callId: ids.callId, name: call.name, arguments: call.arguments, status: call.done ? call.status ?? 'completed' : 'incomplete' };
  });
}

/** The output items of a response with tools, from its state while it runs. */
export function liveToolOutputItems(header: ResponseHeader, state: ToolOutputState, task: Pick<Task, 'status'>): Array<OutputMessage | FunctionCallItem> {
  const running = task.status === 'running' || task.status === 'cancelling' || task.status === 'loading';
  const items: Array<OutputMessage | FunctionCallItem> = [];
  if (state.message !== 'none') {
    items.push(messageItem(header, state.text, state.message === 'closed' ? 'completed' : running ? 'in_progress' : 'incomplete'));
  }
  state.calls.forEach((call, index) => items.push(callItem(header, state, index, call.done ? call.status ?? 'completed' : running ? 'in_progress' : 'incomplete')));
  return items;
}

/** An event whose payload is the response object with these output items (LMSP 7.3). */
export function toolResponseEvent(type: string, header: ResponseHeader, text: string, items: Array<OutputMessage | FunctionCallItem>,
  withTokens = false): EventDraft {
  return {
    type,
    payload: (task) => ({ response: toResponseObject(header, task, text, items), ...(withTokens ? { output_tokens: task.outputTokens } : {}) }),
  };
}
