/**
 * The client-side ledger: everything the service acknowledged (2xx) to the workers, the cancels
 * it accepted and the idempotency keys used, so that the checks can tell a lost acknowledgement
 * or a second task behind one key from ordinary crash noise.
 */
import type { CreateResponseBody } from '../../src/api/types.js';
import type { RestartPolicy } from '../../src/domain/tasks.js';
import type { Random } from './random.js';

export type Mode = 'background' | 'background_stream' | 'stream' | 'plain';

interface Acknowledged {
  responseId: string;
  mode: Mode;
  policy: RestartPolicy;
  shape: number;
  seeded: boolean;
  round: number;
}

interface KeyRecord {
  key: string;
  body: CreateResponseBody;
  mode: Mode;
  policy: RestartPolicy;
  shape: number;
  seeded: boolean;
  round: number;
  /** Distinct response ids named by 2xx answers for this key. */
  ids: Set<string>;
}

export class Ledger {
  readonly acknowledged = new Map<string, Acknowledged>();
  /** Response id -> the status of its first 2xx cancel answer. */
  readonly cancelled = new Map<string, number>();
  readonly keys = new Map<string, KeyRecord>();
  /** Acknowledged since the last API check after a restart. */
  fresh: string[] = [];
  /** The most recent acknowledgements, for cancels that may still catch their task running. */
  private recentIds: string[] = [];

  acknowledge(record: Acknowledged): void {
    if (this.acknowledged.has(record.responseId)) return;
    this.acknowledged.set(record.responseId, record);
    this.fresh.push(record.responseId);
    this.recentIds.push(record.responseId);
    if (this.recentIds.length > 40) this.recentIds.shift();
  }

  recent(random: Random): string | null {
    if (this.recentIds.length > 0 && random.chance(0.85)) return random.pick(this.recentIds);
    if (this.acknowledged.size === 0) return null;
    const all = [...this.acknowledged.keys()];
    return random.pick(all);
  }
}
