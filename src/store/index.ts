/** The store: the only code that touches SQLite. One instance per open database. */
import { ServiceError } from '../domain/errors.js';
import { Database, type OpenOptions, type WriteContext } from './db.js';
import { ChatCompletionTable } from './chat-completions.js';
import { ClientTable } from './clients.js';
import { EventTable } from './events.js';
import { IdempotencyTable, runIdempotent, type IdempotencyKey, type IdempotentOutcome, type Recording } from './idempotency.js';
import { ModelTable } from './models.js';
import { ModelPullTable } from './model-pulls.js';
import { PairingCodeTable } from './pairing-codes.js';
import { ResponseTable } from './responses.js';
import { RetentionTable } from './retention.js';
import { ServiceConfigTable } from './service-config.js';
import { TaskCountTable } from './task-counts.js';
import { TaskLifecycle, type TaskNotifier } from './task-lifecycle.js';
import { TaskTable } from './tasks.js';
import { applyTaskCreate, type TaskCreate, type TaskCreateOutcome } from './task-create.js';
import { TaskWriter, type WriterSettings } from './writer.js';
import type { StoredAnswer } from './idempotency.js';
import type { Task } from '../domain/tasks.js';

export class Store {
  readonly config: ServiceConfigTable;
  readonly clients: ClientTable;
  readonly pairingCodes: PairingCodeTable;
  readonly models: ModelTable;
  readonly responses: ResponseTable;
  readonly tasks: TaskTable;
  readonly events: EventTable;
  readonly idempotency: IdempotencyTable;
  readonly retention: RetentionTable;
  readonly lifecycle: TaskLifecycle;
  readonly taskCounts: TaskCountTable;
  readonly chatCompletions: ChatCompletionTable;
  readonly pulls: ModelPullTable;
  /** Where creates are written when the writer thread is on (`startWriter`); else on `db`. */
  private writer: TaskWriter | null = null;

  constructor(readonly db: Database, private readonly notifier: TaskNotifier = { taskChanged: () => {} }) {
    const sqlite = db.sqlite;
    this.config = new ServiceConfigTable(sqlite);
    this.clients = new ClientTable(sqlite);
    this.pairingCodes = new PairingCodeTable(sqlite);
    this.models = new ModelTable(sqlite);
    this.responses = new ResponseTable(sqlite);
    this.tasks = new TaskTable(sqlite);
    this.events = new EventTable(sqlite);
    this.idempotency = new IdempotencyTable(sqlite);
    this.chatCompletions = new ChatCompletionTable(sqlite);
    this.retention = new RetentionTable(sqlite, this.events);
    this.lifecycle = new TaskLifecycle(this.responses, this.tasks, this.events, notifier, this.chatCompletions);
    this.taskCounts = new TaskCountTable(sqlite);
    this.pulls = new ModelPullTable(sqlite);
  }

  static open(dataDir: string, options: OpenOptions & { notifier?: TaskNotifier } = {}): Store {
    return new Store(Database.open(dataDir, options), options.notifier);
  }

  /**
   * A POST's effect under its Idempotency-Key (LMSP section 8): the early look-up, the
   * preparation, then one transaction holding the re-check, the effect and the recorded answer.
   */
  idempotent<P, R>(key: IdempotencyKey | null, steps: {
    /** The client on whose behalf the effect is made: refused (401) if it was revoked meanwhile (LMSP 4). */
    actor?: string | null;
    prepare: () => P | Promise<P>;
    effect: (context: WriteContext, prepared: P) => { result: R; record: Recording };
  }): Promise<IdempotentOutcome<R>> {
    const { actor } = steps;
    if (!actor) return runIdempotent(this.db, this.idempotency, key, steps);
    return runIdempotent(this.db, this.idempotency, key, {
      prepare: steps.prepare,
      effect: (context, prepared) => {
        if (!this.clients.isLive(actor)) throw new ServiceError('invalid_token');
        return steps.effect(context, prepared);
      },
    });
  }

  /**
   * A create (LMSP 11.2, 8, 16) written as data: the early look-up of the key, the preparation,
   * then `applyTaskCreate` in one transaction, on the writer thread when it is on. The new task
   * is announced to the notifier only after its commit.
   */
  async createTask<P>(key: IdempotencyKey | null, steps: {
    prepare: () => P | Promise<P>;
    command: (prepared: P) => TaskCreate;
  }): Promise<{ replay: StoredAnswer } | { refused: { unfinished: number } } | { revoked: true } | { prepared: P; task: Task }> {
    if (key) {
      const early = this.idempotency.find(key);
      if (early) return { replay: early };
    }
    const prepared = await steps.prepare();
    const command = steps.command(prepared);
    const outcome = await (this.writer ? this.writer.submit(command) : this.writeCreate(command));
    if (!('created' in outcome)) return outcome;
    const task: Task = { ...command.task, seq: outcome.created };
    this.notifier.taskChanged(task.id, task);
    return { prepared, task };
  }

  private writeCreate(command: TaskCreate): Promise<TaskCreateOutcome> {
    return this.db.write(() => applyTaskCreate(this, command));
  }

  /** From now on creates are written by a thread with its own connection (writer.ts). */
  startWriter(settings: WriterSettings): void {
    this.writer ??= new TaskWriter(settings, (command) => this.writeCreate(command), (seconds) => this.db.onCommit?.(seconds));
  }

  /** Resolves once creates go to the writer thread (started if it is not running); false without one. */
  async whenWriterRunning(): Promise<boolean> {
    if (!this.writer) return false;
    await this.writer.whenRunning();
    return true;
  }

  /** Rows written through this store's connections (the writer thread's included): the WAL grew when this moved. */
  totalChanges(): number {
    return this.db.totalChanges() + (this.writer?.changes ?? 0);
  }

  async close(): Promise<void> {
    await this.writer?.close();
    return this.db.close();
  }
}

export { assertPrivateDataDir, Database, DatabaseOpenError, DATABASE_FILE, EXIT_DATABASE_TOO_NEW, EXIT_DATABASE_UNAVAILABLE, sqliteErrorOf } from './db.js';
export type { WriteContext } from './db.js';
export type { RenderedEvent, TaskCreate } from './task-create.js';
export type { IdempotencyKey, IdempotentOutcome, Recording, StoredAnswer } from './idempotency.js';
export type { TaskNotifier } from './task-lifecycle.js';
