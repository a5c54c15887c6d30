/**
 * The output of a response with tools (LMSP 6.2) while its task runs: which items were announced,
 * the message text and each call's arguments so far. Kept in memory per running task, valid while
 * the task's log ends where it was left; otherwise (a restart, a write that did not commit, an
 * event written by another change) it is read again from the log, which holds all of it.
 */
import { emptyToolOutput, type ToolOutputState } from '../api/response-tool-events.js';
import { RESPONSE_TEXT_DELTA } from '../api/response-events.js';
import type { Task } from '../domain/tasks.js';
import type { Store } from '../store/index.js';

/** Events read at a time when the output is rebuilt from the log. */
const PAGE = 500;

interface Cached {
  start: number;
  lastSeq: number;
  state: ToolOutputState;
}

interface LoggedItem {
  output_index?: number;
  item_id?: string;
  delta?: string;
  item?: { type: string; id: string; name?: string; status?: string };
}

/** The output of the task's current attempt, read from its log. */
export function readToolOutput(store: Store, task: Task): ToolOutputState {
  const state = emptyToolOutput(task.attempt);
  const callByItem = new Map<string, number>();
  let after = task.outputStartSeq;
  for (;;) {
    const events = store.events.after(task.id, after, PAGE);
    for (const event of events) {
      switch (event.type) {
        case 'response.output_item.added': {
          const { item } = JSON.parse(event.data) as LoggedItem;
          if (item?.type === 'message') state.message = 'open';
          else if (item?.type === 'function_call') {
            callByItem.set(item.id, state.calls.length);
            state.calls.push({ name: item.name ?? '', arguments: '', done: false });
          }
          break;
        }
        case RESPONSE_TEXT_DELTA.type:
          state.text += (JSON.parse(event.data) as LoggedItem).delta ?? '';
          break;
        case 'response.function_call_arguments.delta': {
          const data = JSON.parse(event.data) as LoggedItem;
          const call = state.calls[callByItem.get(data.item_id ?? '') ?? -1];
          if (call) call.arguments += data.delta ?? '';
          break;
        }
        case 'response.output_item.done': {
          const { item } = JSON.parse(event.data) as LoggedItem;
          if (item?.type === 'message') state.message = 'closed';
          const call = item?.type === 'function_call' ? state.calls[callByItem.get(item.id) ?? -1] : undefined;
          if (call) {
            call.done = true;
            call.status = item?.status === 'incomplete' ? 'incomplete' : 'completed';
          }
          break;
        }
      }
    }
    if (events.length < PAGE) return state;
    after = events.at(-1)!.sequenceNumber;
  }
}

export class ToolOutputCache {
  private readonly cached = new Map<string, Cached>();

  constructor(private readonly store: Store) {}

  /** The task's output so far; the caller may advance it and then `wrote` the events it adds. */
  get(task: Task): ToolOutputState {
    const known = this.cached.get(task.id);
    if (known && known.start === task.outputStartSeq && known.lastSeq === task.lastSequenceNumber && known.state.attempt === task.attempt) {
      return known.state;
    }
    const state = task.outputTokens === 0 ? emptyToolOutput(task.attempt) : readToolOutput(this.store, task);
    this.cached.set(task.id, { start: task.outputStartSeq, lastSeq: task.lastSequenceNumber, state });
    return state;
  }

  /** The state of `task` now holds the `count` events appended after its log's end. */
  wrote(task: Task, count: number): void {
    const known = this.cached.get(task.id);
    if (known) known.lastSeq = task.lastSequenceNumber + count;
  }

  forget(taskId: string): void {
    this.cached.delete(taskId);
  }
}
