/**
 * The rules of a task's life (LMSP 7.2 to 7.5, 11.3), once for every kind of task. Each function
 * runs inside the caller's transaction and reads the task afresh, so it acts on what is on disk:
 * the status change is allowed or not by the domain's transition map, a cancel accepted first
 * wins over a completion, and recovery follows the domain's recovery table. What each change
 * writes to the log comes from the task's kind (`TaskKindHandler`).
 */
import type { TaskErrorCode } from '../domain/errors.js';
import {
  acceptsOutput, isUnfinished, RECOVERY, settledStatus, statusAfterRecovery, wasInterrupted,
  type EventDraft, type FinishReason, type RecoveryOutcome, type Task, type TaskKind,
} from '../domain/tasks.js';
import type { GenerateRequest, OutputUnit } from '../engine/engine.js';
import type { GeneratedToolCall } from '../engine/types.js';

/** What a generating kind asks the engine for; the worker adds the task id and the resume snapshot. */
export type GenerationPlan = Omit<GenerateRequest, 'taskId' | 'resumeTokens'>;
import type { RenderedEvent, Store, WriteContext } from '../store/index.js';
import { nowSeconds } from '../time.js';

/**
 * What a kind of task writes at each moment of its life. `S` is what its events are made from
 * (a response's header, for instance), read once per change.
 */
export interface TaskKindHandler<S> {
  readonly kind: TaskKind;
  load(task: Task): S;
  /** The text the task's current attempt has produced so far. */
  outputText(task: Task): string;
  /** `outputText` of many tasks in one read, by task id, where the kind can; tasks left out are read alone. */
  outputTexts?(tasks: readonly Task[]): Map<string, string>;
  /** The task reached a final status with this output (it is kept with the task's record). */
  finalized(subject: S, task: Task, text: string): void;
  /** For kinds that generate with a model: what to generate, read from the task's record. */
  generation?(task: Task): GenerationPlan;
  events: {
    created(subject: S): EventDraft[];
    loading(subject: S): EventDraft[];
    running(subject: S): EventDraft[];
    /** Output the engine produced (`units`: text and tool-call pieces), with its text and tokens joined. */
    output(subject: S, text: string, tokens: readonly number[], units: readonly OutputUnit[], task: Task): EventDraft[];
    /** `toolCalls`: the calls of the finished generation, when it was given tools. */
    finished(subject: S, text: string, finishReason: FinishReason, toolCalls: readonly GeneratedToolCall[]): EventDraft[];
    failed(subject: S, text: string): EventDraft[];
    cancelling(subject: S, text: string): EventDraft[];
    cancelled(subject: S, text: string): EventDraft[];
    requeued(subject: S, text: string): EventDraft[];
    resumed(subject: S, text: string): EventDraft[];
    /** For kinds that report progress other than output (a pull's bytes): what a report writes. */
    progress?(subject: S, report: unknown): EventDraft[];
  };
}

/**
 * The tasks whose current attempt has output, as `EventTable.outputTexts` reads them: the others
 * have no delta to read.
 */
export function withOutput(tasks: readonly Task[]): Array<{ taskId: string; afterSequence: number }> {
  return tasks.filter((task) => task.outputTokens > 0).map((task) => ({ taskId: task.id, afterSequence: task.outputStartSeq }));
}

export type CancelOutcome =
  | { kind: 'cancelled'; task: Task } // was queued: now cancelled (200)
  | { kind: 'cancelling'; task: Task } // was loading or running: the worker will stop (202)
  | { kind: 'already_cancelling'; task: Task } // 202, no new event
  | { kind: 'already_cancelled'; task: Task } // 200, no new event
  | { kind: 'not_cancellable'; task: Task }; // completed or failed: 409

/** What interrupted a task's run, and what the task is told when it fails because of it. */
export interface Interruption {
  /** The error code of a task it fails: under `fail`, or interrupted more than `max_restarts` times. */
  code: TaskErrorCode;
  /** The error message under `fail`. */
  message: string;
  /** The error message of a task interrupted for the `restarts`th time, more than `maxRestarts`. */
  tooMany(restarts: number, maxRestarts: number): string;
}

/** LMSP 11.3: the service stopped (a crash, a stop) while the task was unfinished. */
export const SERVICE_RESTART: Interruption = {
  code: 'server_restarted',
  message: 'the service restarted before the task finished',
  // The count holds its runner's deaths too: the last interruption is the one named.
  tooMany: (restarts, maxRestarts) => `the task was interrupted ${times(restarts)} (max_restarts is ${maxRestarts}), the last time by a restart of the service`,
};

/**
 * The runner process generating the task died without being asked to (`reason` says how). The
 * service did not restart, so a task this fails gets `engine_error`, as a dead runner's task
 * always did, rather than `server_restarted`.
 */
/** `once`, `twice`, `3 times`: a count of interruptions in a message. */
function times(count: number): string {
  return count === 1 ? 'once' : count === 2 ? 'twice' : `${count} times`;
}

export function engineExit(reason: string): Interruption {
  return {
    code: 'engine_error',
    message: reason,
    tooMany: (restarts, maxRestarts) => `the task was interrupted ${times(restarts)} (max_restarts is ${maxRestarts}), the last time because ${reason}`,
  };
}

export class TaskMachine {
  private readonly handlers = new Map<TaskKind, TaskKindHandler<unknown>>();

  constructor(private readonly store: Store) {}

  /** Serves tasks of the handler's kind. */
  register<S>(handler: TaskKindHandler<S>): this {
    this.handlers.set(handler.kind, handler as TaskKindHandler<unknown>);
    return this;
  }

  private handler(task: Task): TaskKindHandler<unknown> {
    const handler = this.handlers.get(task.kind);
    if (!handler) throw new Error(`no handler for tasks of kind ${task.kind}`);
    return handler;
  }

  /** The text of the task's current attempt so far (LMSP 7.3: the concatenation of its deltas). */
  outputText(task: Task): string {
    return this.handler(task).outputText(task);
  }

  /**
   * `outputText` of many tasks, read together where their kind can (recovery's windows), by task
   * id; a task left out is read alone when needed.
   */
  outputTexts(tasks: readonly Task[]): Map<string, string> {
    const texts = new Map<string, string>();
    const byKind = new Map<TaskKind, Task[]>();
    for (const task of tasks) {
      const ofKind = byKind.get(task.kind);
      if (ofKind) ofKind.push(task);
      else byKind.set(task.kind, [task]);
    }
    for (const [kind, ofKind] of byKind) {
      for (const [id, text] of this.handlers.get(kind)?.outputTexts?.(ofKind) ?? []) texts.set(id, text);
    }
    return texts;
  }

  /** What the task's generation asks of the engine; null for kinds that do not generate. */
  generationPlan(task: Task): GenerationPlan | null {
    return this.handler(task).generation?.(task) ?? null;
  }

  /** LMSP 11.2: a new task, queued, with its `created` event, in the caller's transaction. */
  create<S>(context: WriteContext, task: Task, subject: S): Task {
    const handler = this.handler(task) as TaskKindHandler<S>;
    return this.store.lifecycle.insert(context, task, handler.events.created(subject));
  }

  /**
   * LMSP 11.2: a new task as `create` writes it, queued, with its `created` events rendered, for
   * a create handed to the store as data (`Store.createTask`).
   */
  draftCreate<S>(task: Task, subject: S): { task: Task; events: RenderedEvent[] } {
    const drafts = (this.handler(task) as TaskKindHandler<S>).events.created(subject);
    const created: Task = { ...task, status: 'queued', lastSequenceNumber: drafts.length };
    return { task: created, events: drafts.map((draft, index) => ({ type: draft.type, payload: draft.payload({ ...created, lastSequenceNumber: index + 1 }) })) };
  }

  /** queued -> loading (LMSP 5: the model loads on first use). Null when it is no longer queued. */
  startLoading(context: WriteContext, taskId: string): Task | null {
    const task = this.store.tasks.get(taskId);
    if (!task) return null;
    const handler = this.handler(task);
    return this.store.lifecycle.move(context, task, 'loading', {}, handler.events.loading(handler.load(task)));
  }

  /** queued or loading -> running, with what the kind announces before any output. */
  startRunning(context: WriteContext, taskId: string): Task | null {
    const task = this.store.tasks.get(taskId);
    if (!task) return null;
    const handler = this.handler(task);
    return this.store.lifecycle.move(context, task, 'running', { startedAt: task.startedAt ?? nowSeconds(), outputTokens: 0 },
      handler.events.running(handler.load(task)));
  }

  /** Records the prompt's size once the engine has tokenized it (no status change, no event). */
  setInputTokens(context: WriteContext, taskId: string, inputTokens: number): void {
    const task = this.store.tasks.get(taskId);
    if (!task || !isUnfinished(task.status)) return;
    this.store.lifecycle.record(context, task, { inputTokens }, []);
  }

  /**
   * Appends generated output as one event carrying its token ids (the snapshot, LMSP 7.5).
   * Allowed while running and while cancelling (the worker may still be finishing a token);
   * false when the task has moved on and the output was not recorded.
   */
  appendOutput(context: WriteContext, taskId: string, units: readonly OutputUnit[]): boolean {
    if (units.length === 0) return true;
    const task = this.store.tasks.get(taskId);
    if (!task || !acceptsOutput(task.status)) return false;
    const handler = this.handler(task);
    const text = units.map((unit) => unit.text).join('');
    const tokens = units.flatMap((unit) => unit.tokens);
    const drafts = text.length > 0 || tokens.length > 0 || units.some((unit) => unit.toolCalls?.length)
      ? handler.events.output(handler.load(task), text, tokens, units, task)
      : [];
    return this.store.lifecycle.record(context, task, { outputTokens: task.outputTokens + tokens.length }, drafts) !== null;
  }

  /**
   * Logs a progress report of a kind that has them (a pull's bytes), without a status change;
   * only while running. False when the task has moved on and nothing was written.
   */
  recordProgress(context: WriteContext, taskId: string, report: unknown): boolean {
    const task = this.store.tasks.get(taskId);
    if (!task || task.status !== 'running') return false;
    const handler = this.handler(task);
    const drafts = handler.events.progress?.(handler.load(task), report) ?? [];
    return drafts.length === 0 || this.store.lifecycle.record(context, task, {}, drafts) !== null;
  }

  /** running -> completed; a task whose cancel was accepted first ends cancelled instead (LMSP 7.4). */
  complete(context: WriteContext, taskId: string, finishReason: FinishReason, toolCalls: readonly GeneratedToolCall[] = []): Task | null {
    const task = this.store.tasks.get(taskId);
    if (!task) return null;
    if (settledStatus(task.status, 'completed') === 'cancelled') return this.cancelledNow(context, task, 'run');
    const handler = this.handler(task);
    const subject = handler.load(task);
    const text = handler.outputText(task);
    const finished = this.store.lifecycle.move(context, task, 'completed', { finishedAt: nowSeconds(), finishReason },
      handler.events.finished(subject, text, finishReason, toolCalls));
    if (finished) handler.finalized(subject, finished, text);
    return finished;
  }

  /** loading or running -> failed; a task whose cancel was accepted first ends cancelled instead (LMSP 7.4). */
  fail(context: WriteContext, taskId: string, code: TaskErrorCode, message: string): Task | null {
    const task = this.store.tasks.get(taskId);
    if (!task) return null;
    if (settledStatus(task.status, 'failed') === 'cancelled') return this.cancelledNow(context, task, 'run');
    return this.failNow(context, task, code, message, 'run');
  }

  private failNow(context: WriteContext, task: Task, code: TaskErrorCode, message: string, phase: 'run' | 'recovery',
    change: Partial<Task> = {}, known?: unknown, knownText?: string): Task | null {
    const handler = this.handler(task);
    const subject = known ?? handler.load(task);
    const text = knownText ?? handler.outputText(task);
    const failed = this.store.lifecycle.move(context, task, 'failed', { ...change, finishedAt: nowSeconds(), error: { code, message } },
      handler.events.failed(subject, text), phase);
    if (failed) handler.finalized(subject, failed, text);
    return failed;
  }

  /** LMSP 7.4, one transaction: queued -> cancelled; loading/running -> cancelling; else as it is. */
  cancel(context: WriteContext, taskId: string): CancelOutcome | null {
    const task = this.store.tasks.get(taskId);
    if (!task) return null;
    switch (task.status) {
      case 'queued': {
        const cancelled = this.cancelledNow(context, task, 'run');
        return cancelled ? { kind: 'cancelled', task: cancelled } : null;
      }
      case 'loading':
      case 'running': {
        const handler = this.handler(task);
        const cancelling = this.store.lifecycle.move(context, task, 'cancelling', {},
          handler.events.cancelling(handler.load(task), handler.outputText(task)));
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

  /** cancelling -> cancelled: the worker has stopped. */
  finishCancel(context: WriteContext, taskId: string): Task | null {
    const task = this.store.tasks.get(taskId);
    if (!task || task.status !== 'cancelling') return null;
    return this.cancelledNow(context, task, 'run');
  }

  private cancelledNow(context: WriteContext, task: Task, phase: 'run' | 'recovery', known?: unknown, knownText?: string): Task | null {
    const handler = this.handler(task);
    const subject = known ?? handler.load(task);
    const text = knownText ?? handler.outputText(task);
    const cancelled = this.store.lifecycle.move(context, task, 'cancelled', { finishedAt: nowSeconds() },
      handler.events.cancelled(subject, text), phase);
    if (cancelled) handler.finalized(subject, cancelled, text);
    return cancelled;
  }

  /**
   * LMSP 11.3 and 7.5 for one task found unfinished at startup: its policy's outcome and the
   * events of 7.5, in the caller's transaction. `known` is what the task's events are made from,
   * and `knownText` its output so far, when the caller has read them already (recovery reads the
   * first with the task and the second with its window's, `outputTexts`).
   */
  recover(context: WriteContext, task: Task, maxRestarts: number, known?: unknown, knownText?: string): RecoveryOutcome {
    return this.applyRestartPolicy(context, task, maxRestarts, SERVICE_RESTART, known, knownText);
  }

  /**
   * LMSP 7.5 while the service runs: the runner process generating the task died without being
   * asked to. The task gets its policy's outcome and events exactly as at startup (`recover`),
   * the death counting as a restart against `max_restarts`, so a task that crashes its runner
   * every time ends failed rather than in a loop; one whose cancel was accepted ends cancelled.
   * A resumed task stays running and a requeued one queued: the scheduler takes either up again
   * as it does after a startup. Null, writing nothing, when the task was not loading, running or
   * cancelling.
   */
  interrupt(context: WriteContext, taskId: string, maxRestarts: number, interruption: Interruption): RecoveryOutcome | null {
    const task = this.store.tasks.get(taskId);
    if (!task || !(wasInterrupted(task.status) || task.status === 'cancelling')) return null;
    return this.applyRestartPolicy(context, task, maxRestarts, interruption);
  }

  private applyRestartPolicy(context: WriteContext, task: Task, maxRestarts: number, interruption: Interruption,
    known?: unknown, knownText?: string): RecoveryOutcome {
    if (!isUnfinished(task.status)) return 'unchanged';
    const outcome = RECOVERY[task.onRestart][task.status];
    if (outcome === 'unchanged') return 'unchanged';
    const handler = this.handler(task);
    const subject = known ?? handler.load(task);
    const text = () => knownText ?? handler.outputText(task);
    const restarts = wasInterrupted(task.status) ? task.restarts + 1 : task.restarts;
    if (wasInterrupted(task.status) && restarts > maxRestarts) {
      // LMSP 7.5: one poisonous task must not crash the service forever.
      this.failNow(context, task, interruption.code, interruption.tooMany(restarts, maxRestarts), 'recovery', { restarts }, subject,
        knownText);
      return 'failed';
    }
    const to = statusAfterRecovery(task.status, outcome);
    switch (outcome) {
      case 'failed':
        this.failNow(context, task, interruption.code, interruption.message, 'recovery', { restarts }, subject, knownText);
        break;
      case 'cancelled':
        this.cancelledNow(context, task, 'recovery', subject, knownText);
        break;
      case 'requeued': {
        // Under retry the new attempt drops the earlier output: it starts after this event, and
        // until it runs the task has not started (no output item, `started_at` null), as a new one.
        const retry = task.onRestart === 'retry';
        const change: Partial<Task> = retry
          ? { restarts, attempt: task.attempt + 1, outputStartSeq: task.lastSequenceNumber + 1, outputTokens: 0, inputTokens: null, startedAt: null }
          : { restarts };
        this.store.lifecycle.move(context, task, to, change,
          handler.events.requeued(subject, retry ? '' : text()), 'recovery');
        break;
      }
      case 'resumed':
        this.store.lifecycle.move(context, task, to, { restarts }, handler.events.resumed(subject, text()), 'recovery');
        break;
    }
    return outcome;
  }
}
