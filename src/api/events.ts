/** Logged events to their wire form (LMSP 7.3): the payload at the top level, as in the OpenAI stream. */
import type { LoggedEvent } from '../domain/tasks.js';
import { CHAT_TERMINAL_EVENTS } from './chat-completion-events.js';
import { PULL_TERMINAL_EVENTS } from './pull-events.js';
import { RESPONSE_TERMINAL_EVENTS } from './response-events.js';
import type { TaskEvent } from './types.js';

/** Event types after which nothing more is written to a task's log, whatever its kind. */
export const TERMINAL_EVENTS: ReadonlySet<string> = new Set<string>([...RESPONSE_TERMINAL_EVENTS, ...CHAT_TERMINAL_EVENTS, ...PULL_TERMINAL_EVENTS]);

/** The wire JSON of an event, built without re-parsing its stored payload. */
export function eventJson(event: LoggedEvent): string {
  const head = `{"type":${JSON.stringify(event.type)},"sequence_number":${event.sequenceNumber},"created_at":${event.createdAt}`;
  return event.data === '{}' ? `${head}}` : `${head},${event.data.slice(1)}`;
}

/** An event as one server-sent event frame (LMSP 7.3): `id`, `event`, `data`. */
export function sseFrame(event: LoggedEvent): string {
  return `id: ${event.sequenceNumber}\nevent: ${event.type}\ndata: ${eventJson(event)}\n\n`;
}

export function toTaskEvent(event: LoggedEvent): TaskEvent {
  return { type: event.type, sequence_number: event.sequenceNumber, created_at: event.createdAt, ...(JSON.parse(event.data) as object) };
}
