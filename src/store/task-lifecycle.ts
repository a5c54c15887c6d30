/**
 * Every change of a task's status, each one a single function that runs inside one transaction
 * (the caller's `db.write` or `db.transaction`), so the atomicity rules of LMSP 11.2 are visible
 * in one place:
 *
 * - the status, the events it implies and `last_sequence_number` change together (LMSP 7.2, 7.3);
 * - every status update is conditional on the status that was read, so two writers (a cancel and
 *   a completion) can never both win: completion succeeds only from `running` (LMSP 7.4);
 * - the recovery table of LMSP 11.3 is applied here, one task, one transaction.
 */
import { toResponseObject } from '../api/views.js';
import type { TaskErrorCode } from '../api/errors.js';
import { nowSeconds } from '../time.js';
import { assertTransition, RECOVERY, type TaskStatus, isFinal, isUnfinished } from '../tasks/states.js';
import type { FinishReason, ResponseHeader, StoredResponse, Task } from '../tasks/types.js';
import type { WriteContext } from './db.js';
import { DELTA_EVENT, type EventTable } from './events.js';
import type { ResponseTable } from './responses.js';
import type { TaskTable } from './tasks.js';

/** Told after each commit that changed a task, so live followers can read the new events. */
export interface TaskNotifier {
  taskChanged(taskId: string, task: Task): void;
}

/** One piece of generated output: text and the token ids that produced it. */
export interface OutputUnit {
  text: string;
  tokens: readonly number[];
}

export type CancelOutcome =
  | { kind: 'cancelled'; task: Task } // was queued: now cancelled (200)
  | { kind: 'cancelling'; task: Task } // was loading or running: worker will stop (202)
  | { kind: 'already_cancelling'; task: Task } // 202, no new event
  | { kind: 'already_cancelled'; task: Task } // 200, no new event
  | { kind: 'not_cancellable'; task: Task }; // completed or failed: 409

export type RecoveryOutcome = 'unchanged' | 'failed' | 'cancelled' | 'requeued' | 'resumed';

interface PendingEvent {
  type: string;
  payload: (task: Task) => object;
  tokens?: readonly number[];
}

const OUTPUT_INDEX = 0;
const CONTENT_INDEX = 0;

export class TaskLifecycle {
  constructor(
    private readonly responses: ResponseTable,
    private readonly tasks: TaskTable,
    private readonly events: EventTable,
    private readonly notifier: TaskNotifier,
  ) {}

  /** The text of the current attempt so far (LMSP 7.3: the concatenation of its deltas). */
  outputText(task: Task): string {
    // No token in this attempt means no delta to read (recovery of many idle tasks skips the query).
    return task.outputTokens === 0 ? '' : this.events.outputText(task.id, task.outputStartSeq);
  }

  private header(task: Task): ResponseHeader {
    const header = this.responses.getHeader(task.responseId);
    if (!header) throw new Error(`response ${task.responseId} of task ${task.id} is missing`);
    return header;
  }

  private responsePayload(header: ResponseHeader, text: () => string) {
    return (task: Task) => ({ response: toResponseObject(header, task, text()) });
  }

  /**
   * Applies a status change (or, at recovery, a status kept) with its events. Returns null,
   * writing nothing, when the stored status is no longer `task.status`.
   */
  private apply(context: WriteContext, task: Task, to: TaskStatus, change: Partial<Task>, events: PendingEvent[],
    phase: 'run' | 'recovery' = 'run'): Task | null {
    // Appending output and resuming keep the status: only real status changes are checked.
    if (to !== task.status) assertTransition(task.status, to, phase);
    const next: Task = { ...task, ...change, status: to, lastSequenceNumber: task.lastSequenceNumber + events.length };
    if (!this.tasks.update(next, task.status)) return null;
    const now = nowSeconds();
    events.forEach((event, index) => {
      const sequenceNumber = task.lastSequenceNumber + index + 1;
      const payload = event.payload({ ...next, lastSequenceNumber: sequenceNumber });
      this.events.append(task.id, sequenceNumber, event.type, now, payload, event.tokens ?? null);
    });
    context.afterCommit(() => this.notifier.taskChanged(task.id, next));
    return next;
  }

  /** LMSP 11.2: the response, its task and `response.created` in one transaction, before any 202. */
  create(context: WriteContext, response: StoredResponse, task: Task): Task {
    this.responses.insert(response);
    const created: Task = { ...task, status: 'queued', lastSequenceNumber: 1 };
    created.seq = this.tasks.insert(created);
    this.events.append(task.id, 1, 'response.created', created.createdAt, { response: toResponseObject(response, created, '') });
    context.afterCommit(() => this.notifier.taskChanged(task.id, created));
    return created;
  }

  /** queued -> loading (LMSP 5: the model loads on first use). Null if it is no longer queued. */
  startLoading(context: WriteContext, taskId: string): Task | null {
    const task = this.tasks.get(taskId);
    if (!task || task.status !== 'queued') return null;
    const header = this.header(task);
    return this.apply(context, task, 'loading', {}, [
      { type: 'response.loading', payload: this.responsePayload(header, () => '') },
    ]);
  }

  /**
   * queued or loading -> running, with the output message and its text part announced in the
   * same transaction (the order the OpenAI stream helpers need before any delta).
   */
  startRunning(context: WriteContext, taskId: string): Task | null {
    const task = this.tasks.get(taskId);
    if (!task || (task.status !== 'queued' && task.status !== 'loading')) return null;
    const header = this.header(task);
    const item = { type: 'message', id: header.outputItemId, role: 'assistant', status: 'in_progress', content: [] };
    return this.apply(context, task, 'running', { startedAt: task.startedAt ?? nowSeconds(), outputTokens: 0 }, [
      { type: 'response.in_progress', payload: this.responsePayload(header, () => '') },
      { type: 'response.output_item.added', payload: () => ({ output_index: OUTPUT_INDEX, item }) },
      {
        type: 'response.content_part.added',
        payload: () => ({ item_id: header.outputItemId, output_index: OUTPUT_INDEX, content_index: CONTENT_INDEX,
          part: { type: 'output_text', text: '', annotations: [] } }),
      },
    ]);
  }

  /** Records the prompt's size once the engine has tokenized it (no status change, no event). */
  setInputTokens(taskId: string, inputTokens: number): void {
    const task = this.tasks.get(taskId);
    if (!task || !isUnfinished(task.status)) return;
    this.tasks.update({ ...task, inputTokens }, task.status);
  }

  /**
   * Appends generated text as one delta event carrying its token ids (the snapshot, LMSP 7.5).
   * Allowed while running and while cancelling (the worker may still be finishing a token);
   * false when the task has moved on and the output was not recorded.
   */
  appendOutput(context: WriteContext, taskId: string, units: readonly OutputUnit[]): boolean {
    if (units.length === 0) return true;
    const task = this.tasks.get(taskId);
    if (!task || (task.status !== 'running' && task.status !== 'cancelling')) return false;
    const header = this.header(task);
    const text = units.map((unit) => unit.text).join('');
    const tokens = units.flatMap((unit) => unit.tokens);
    const events: PendingEvent[] = [];
    if (text.length > 0 || tokens.length > 0) {
      events.push({
        type: DELTA_EVENT,
        tokens,
        payload: () => ({ item_id: header.outputItemId, output_index: OUTPUT_INDEX, content_index: CONTENT_INDEX, delta: text, logprobs: [] }),
      });
    }
    return this.apply(context, task, task.status, { outputTokens: task.outputTokens + tokens.length }, events) !== null;
  }

  /**
   * running -> completed, with the closing events of the text, its part, its message and the
   * response. Conditional on `running` (LMSP 7.4): if a cancel was accepted first, the task ends
   * `cancelled` instead, never `completed`.
   */
  complete(context: WriteContext, taskId: string, finishReason: FinishReason): Task | null {
    const task = this.tasks.get(taskId);
    if (!task) return null;
    if (task.status === 'cancelling') return this.finishCancel(context, taskId);
    if (task.status !== 'running') return null;
    const header = this.header(task);
    const text = this.outputText(task);
    const part = { type: 'output_text', text, annotations: [] };
    const itemStatus = finishReason === 'max_output_tokens' ? 'incomplete' : 'completed';
    const ids = { item_id: header.outputItemId, output_index: OUTPUT_INDEX, content_index: CONTENT_INDEX };
    const finished = this.apply(context, task, 'completed', { finishedAt: nowSeconds(), finishReason }, [
      { type: 'response.output_text.done', payload: () => ({ ...ids, text, logprobs: [] }) },
      { type: 'response.content_part.done', payload: () => ({ ...ids, part }) },
      {
        type: 'response.output_item.done',
        payload: () => ({ output_index: OUTPUT_INDEX,
          item: { type: 'message', id: header.outputItemId, role: 'assistant', status: itemStatus, content: [part] } }),
      },
      {
        type: finishReason === 'max_output_tokens' ? 'response.incomplete' : 'response.completed',
        payload: this.responsePayload(header, () => text),
      },
    ]);
    if (finished && text !== '') this.responses.setOutputText(task.responseId, text);
    return finished;
  }

  /**
   * loading or running -> failed with `response.failed`. A task whose cancel was accepted ends
   * `cancelled` instead (LMSP 7.4). Null when the task had already finished.
   */
  fail(context: WriteContext, taskId: string, code: TaskErrorCode, message: string): Task | null {
    const task = this.tasks.get(taskId);
    if (!task) return null;
    if (task.status === 'cancelling') return this.finishCancel(context, taskId);
    if (task.status !== 'loading' && task.status !== 'running') return null;
    return this.failNow(context, task, code, message, 'run');
  }

  private failNow(context: WriteContext, task: Task, code: TaskErrorCode, message: string, phase: 'run' | 'recovery',
    change: Partial<Task> = {}, header = this.header(task)): Task | null {
    const text = this.outputText(task);
    const failed = this.apply(context, task, 'failed', { ...change, finishedAt: nowSeconds(), error: { code, message } }, [
      { type: 'response.failed', payload: this.responsePayload(header, () => text) },
    ], phase);
    if (failed && text !== '') this.responses.setOutputText(task.responseId, text);
    return failed;
  }

  /** LMSP 7.4, one transaction: queued -> cancelled; loading/running -> cancelling; else as is. */
  cancel(context: WriteContext, taskId: string): CancelOutcome | null {
    const task = this.tasks.get(taskId);
    if (!task) return null;
    switch (task.status) {
      case 'queued': {
        const cancelled = this.cancelledNow(context, task, 'run');
        return cancelled ? { kind: 'cancelled', task: cancelled } : null;
      }
      case 'loading':
      case 'running': {
        const header = this.header(task);
        const cancelling = this.apply(context, task, 'cancelling', {}, [
          { type: 'response.cancelling', payload: this.responsePayload(header, () => this.outputText(task)) },
        ]);
        return cancelling ? { kind: 'cancelling', task: cancelling } : null;
      }
      case 'cancelling':
        return { kind: 'already_cancelling', task };
      case 'cancelled':
        return { kind: 'already_cancelled', task };
      case 'completed':
      case 'failed':
        return { kind: 'not_cancellable', task };
    }
  }

  /** cancelling -> cancelled: the worker has stopped (or the service restarted, LMSP 11.3). */
  finishCancel(context: WriteContext, taskId: string): Task | null {
    const task = this.tasks.get(taskId);
    if (!task || task.status !== 'cancelling') return null;
    return this.cancelledNow(context, task, 'run');
  }

  private cancelledNow(context: WriteContext, task: Task, phase: 'run' | 'recovery', header = this.header(task)): Task | null {
    const text = this.outputText(task);
    const cancelled = this.apply(context, task, 'cancelled', { finishedAt: nowSeconds() }, [
      { type: 'response.cancelled', payload: this.responsePayload(header, () => text) },
    ], phase);
    if (cancelled && text !== '') this.responses.setOutputText(task.responseId, text);
    return cancelled;
  }

  /**
   * LMSP 11.3 and 7.5 for one task found unfinished at startup: its policy's outcome and the
   * events of 7.5, in the caller's transaction. `known` is the task's response header when the
   * caller has read it already (recovery reads it with the task).
   */
  recover(context: WriteContext, task: Task, maxRestarts: number, known?: ResponseHeader): RecoveryOutcome {
    if (!isUnfinished(task.status)) return 'unchanged';
    const target = RECOVERY[task.onRestart][task.status];
    if (target === 'queued' && task.status === 'queued') return 'unchanged'; // stays as it is, no event (LMSP 7.5)
    const header = known ?? this.header(task);
    const wasActive = task.status === 'loading' || task.status === 'running';
    const restarts = wasActive ? task.restarts + 1 : task.restarts;
    if (wasActive && restarts > maxRestarts) {
      // LMSP 7.5: one poisonous task must not crash the service forever.
      this.failNow(context, task, 'server_restarted',
        `the task was interrupted by a restart ${restarts} times (max_restarts is ${maxRestarts})`, 'recovery', { restarts }, header);
      return 'failed';
    }
    switch (target) {
      case 'failed':
        this.failNow(context, task, 'server_restarted', 'the service restarted before the task finished', 'recovery', { restarts }, header);
        return 'failed';
      case 'cancelled':
        this.cancelledNow(context, task, 'recovery', header);
        return 'cancelled';
      case 'queued': {
        const retry = task.onRestart === 'retry';
        const requeuedSeq = task.lastSequenceNumber + 1;
        // Under retry the new attempt drops the earlier output: it starts after this event.
        const change: Partial<Task> = retry
          ? { restarts, attempt: task.attempt + 1, outputStartSeq: requeuedSeq, outputTokens: 0, inputTokens: null }
          : { restarts };
        this.apply(context, task, 'queued', change, [
          { type: 'response.queued', payload: this.responsePayload(header, () => (retry ? '' : this.outputText(task))) },
        ], 'recovery');
        return 'requeued';
      }
      case 'running': {
        const text = this.outputText(task);
        this.apply(context, task, 'running', { restarts }, [
          { type: 'response.resumed', payload: (next) => ({ ...this.responsePayload(header, () => text)(next), output_tokens: next.outputTokens }) },
        ], 'recovery');
        return 'resumed';
      }
      default:
        throw new Error(`unexpected recovery target ${target}`);
    }
  }

  /** Deletes a finished response with its task and events (LMSP 6: DELETE, store: false). */
  deleteFinished(taskId: string): boolean {
    const task = this.tasks.get(taskId);
    if (!task || !isFinal(task.status)) return false;
    this.events.deleteForTask(task.id);
    this.tasks.delete(task.id);
    this.responses.delete(task.responseId);
    return true;
  }
}
