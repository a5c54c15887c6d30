/**
 * The client-side ledger: everything the service acknowledged (2xx) to the workers, the cancels
 * it accepted and the idempotency keys used, so that the checks can tell a lost acknowledgement
 * or a second task behind one key from ordinary crash noise.
 */
import type { CreateChatCompletionBody } from '../../src/api/chat-completions.js';
import type { CreateResponseBody } from '../../src/api/types.js';
import type { RestartPolicy } from '../../src/domain/tasks.js';
import type { Random } from './random.js';

export type Mode = 'background' | 'background_stream' | 'stream' | 'plain';

/**
 * What was created: a response (known by its response id), a chat completion (known by its task
 * id, which the status line names before any chunk: `LMSP-Task-Id`) or a model pull (its task).
 */
export type Kind = 'response' | 'chat' | 'pull';

/** What a pull was asked for. */
export interface PullRecord {
  modelId: string;
  /** The pull named a digest other than the file's: it must never complete. */
  wrongDigest: boolean;
}

interface Acknowledged {
  /** The response id, or the task id of a chat completion. */
  id: string;
  kind: Kind;
  /** False for a chat completion made with `store: false`, deleted (task and log) once finished. */
  store: boolean;
  pull?: PullRecord;
  mode: Mode;
  policy: RestartPolicy;
  shape: number;
  seeded: boolean;
  round: number;
}

interface KeyRecord {
  key: string;
  kind: Kind;
  body: CreateResponseBody | CreateChatCompletionBody;
  mode: Mode;
  policy: RestartPolicy;
  shape: number;
  seeded: boolean;
  round: number;
  /** Distinct ids (as in Acknowledged) named by 2xx answers for this key. */
  ids: Set<string>;
}

export class Ledger {
  readonly acknowledged = new Map<string, Acknowledged>();
  /** Id (as in Acknowledged) -> the status of its first 2xx cancel answer. */
  readonly cancelled = new Map<string, number>();
  readonly keys = new Map<string, KeyRecord>();
  /** Acknowledged since the last API check after a restart. */
  fresh: string[] = [];
  /** The most recent acknowledgements, for cancels that may still catch their task running. */
  private recentIds: string[] = [];

  acknowledge(record: Acknowledged): void {
    if (this.acknowledged.has(record.id)) return;
    this.acknowledged.set(record.id, record);
    this.fresh.push(record.id);
    this.recentIds.push(record.id);
    if (this.recentIds.length > 40) this.recentIds.shift();
  }

  recent(random: Random): string | null {
    if (this.recentIds.length > 0 && random.chance(0.85)) return random.pick(this.recentIds);
    if (this.acknowledged.size === 0) return null;
    const all = [...this.acknowledged.keys()];
    return random.pick(all);
  }
}
