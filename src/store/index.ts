/** The store: the only code that touches SQLite. One instance per open database. */
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

  constructor(readonly db: Database, notifier: TaskNotifier = { taskChanged: () => {} }) {
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
    prepare: () => P | Promise<P>;
    effect: (context: WriteContext, prepared: P) => { result: R; record: Recording };
  }): Promise<IdempotentOutcome<R>> {
    return runIdempotent(this.db, this.idempotency, key, steps);
  }

  close(): Promise<void> {
    return this.db.close();
  }
}

export { Database, DatabaseOpenError, DATABASE_FILE } from './db.js';
export type { WriteContext } from './db.js';
export type { IdempotencyKey, IdempotentOutcome, Recording, StoredAnswer } from './idempotency.js';
export type { TaskNotifier } from './task-lifecycle.js';
