/**
 * How a task's status and its log change together, in the caller's transaction (`db.write` or
 * `db.transaction`), so the atomicity rules of LMSP 11.2 hold in one place:
 *
 * - the status, the events it implies and `last_sequence_number` change together (LMSP 7.2, 7.3);
 * - every update is conditional on the status that was read, so two writers (a cancel and a
 *   completion) can never both win (LMSP 7.4);
 * - a status change is applied only when the transition map allows it (src/domain/tasks.ts).
 *
 * The store stores what it is given: which events a change writes, and what they say, is the
 * business of the task's kind (src/tasks/), which passes them in as drafts.
 */
import { assertTransition, canTransition, isFinal, type EventDraft, type Task, type TaskStatus } from '../domain/tasks.js';
import { nowSeconds } from '../time.js';
import type { WriteContext } from './db.js';
import type { ChatCompletionTable } from './chat-completions.js';
import type { EventTable } from './events.js';
import type { ResponseTable } from './responses.js';
import type { TaskTable } from './tasks.js';

/**
 * A transaction's context whose recovery moves update their tasks together at `flush`, one
 * statement for the whole window instead of one per task (`TaskLifecycle.deferring`).
 */
export interface DeferringContext extends WriteContext {
  readonly deferred: DeferredMoves;
  /** Writes the moves kept so far; throws (rolling the transaction back) if one did not apply. */
  flush(): void;
}

interface DeferredMoves {
  tasks: Array<{ task: Task; expectedStatus: TaskStatus }>;
}

function deferredMoves(context: WriteContext): DeferredMoves | null {
  return (context as Partial<DeferringContext>).deferred ?? null;
}

/** Told after each commit that changed a task, so live followers can read the new events. */
export interface TaskNotifier {
  /** `previous`: the status the commit changed the task from (the same when it did not); null for a new task. */
  taskChanged(taskId: string, task: Task, previous?: TaskStatus | null): void;
}

export class TaskLifecycle {
  constructor(
    private readonly responses: ResponseTable,
    private readonly tasks: TaskTable,
    private readonly events: EventTable,
    private readonly notifier: TaskNotifier,
    private readonly chatCompletions: ChatCompletionTable | null = null,
  ) {}

  private append(task: Task, firstSequence: number, drafts: readonly EventDraft[], at: number): void {
    drafts.forEach((draft, index) => {
      const sequenceNumber = firstSequence + index;
      const payload = draft.payload({ ...task, lastSequenceNumber: sequenceNumber });
      this.events.append(task.id, sequenceNumber, draft.type, at, payload, draft.tokens ?? null);
    });
  }

  /** LMSP 11.2: a new task, queued, with its first events, before anything is answered. */
  insert(context: WriteContext, task: Task, drafts: readonly EventDraft[]): Task {
    const created: Task = { ...task, status: 'queued', lastSequenceNumber: drafts.length };
    created.seq = this.tasks.insert(created);
    this.append(created, 1, drafts, created.createdAt);
    context.afterCommit(() => this.notifier.taskChanged(created.id, created));
    return created;
  }

  /**
   * Moves `task` to `to` with `change` and the events `drafts` builds, if the stored status is
   * still `task.status` and the transition map allows the move; returns null, writing nothing,
   * otherwise. At startup, and for a task whose runner process died (`recovery`), the recovery
   * table of LMSP 11.3 applies instead (where a resumed task stays running), and a move it does
   * not allow is a bug.
   */
  move(context: WriteContext, task: Task, to: TaskStatus, change: Partial<Task>, drafts: readonly EventDraft[],
    phase: 'run' | 'recovery' = 'run'): Task | null {
    if (phase === 'recovery') assertTransition(task.status, to, phase);
    else if (!canTransition(task.status, to)) return null;
    return this.write(context, task, to, change, drafts, phase === 'recovery' ? deferredMoves(context) : null);
  }

  /**
   * A context for recovery (LMSP 11.3) in `context`'s transaction: the tasks that moves made
   * through it change are written at `flush`, their events at once. Only recovery may use it:
   * nothing else writes then, so no move can lose a race between being made and being written,
   * and `flush` checks it.
   */
  deferring(context: WriteContext): DeferringContext {
    const deferred: DeferredMoves = { tasks: [] };
    return {
      deferred,
      afterCommit: (hook) => context.afterCommit(hook),
      flush: () => {
        const written = this.tasks.updateMany(deferred.tasks);
        if (written !== deferred.tasks.length) {
          throw new Error(`recovery changed ${written} of ${deferred.tasks.length} tasks: another writer changed them meanwhile`);
        }
        deferred.tasks = [];
      },
    };
  }

  /** Records progress (output, token counts) without a status change, if the stored status is still `task.status`. */
  record(context: WriteContext, task: Task, change: Partial<Task>, drafts: readonly EventDraft[]): Task | null {
    return this.write(context, task, task.status, change, drafts);
  }

  /**
   * With `deferred` (recovery through a deferring context) the task's update waits for the
   * context's `flush`, which checks it; its events are written now either way (one statement
   * each: measured, inserting these large rows through json_each cost more than it saved).
   */
  private write(context: WriteContext, task: Task, to: TaskStatus, change: Partial<Task>, drafts: readonly EventDraft[],
    deferred: DeferredMoves | null = null): Task | null {
    const next: Task = { ...task, ...change, status: to, lastSequenceNumber: task.lastSequenceNumber + drafts.length };
    if (deferred) deferred.tasks.push({ task: next, expectedStatus: task.status });
    else if (!this.tasks.update(next, task.status)) return null;
    this.append(next, task.lastSequenceNumber + 1, drafts, nowSeconds());
    context.afterCommit(() => this.notifier.taskChanged(task.id, next, task.status));
    return next;
  }

  /** Deletes a finished task with its events and its response or chat completion (LMSP 6, 13: DELETE, `store: false`). */
  deleteFinished(taskId: string): boolean {
    const task = this.tasks.get(taskId);
    if (!task || !isFinal(task.status)) return false;
    this.events.deleteForTask(task.id);
    this.tasks.delete(task.id);
    if (task.responseId !== null) this.responses.delete(task.responseId);
    if (task.completionId !== null) this.chatCompletions?.delete(task.completionId);
    return true;
  }
}
