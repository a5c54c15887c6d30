/** The `model_pulls` table (LMSP 5.1): what each `model_pull` task fetches and how to continue it. */
import type { ModelPull, PullResumeState } from '../domain/pulls.js';
import { PULL_KINDS, UNFINISHED_STATUSES, type Task } from '../domain/tasks.js';
import type { Sqlite } from './db.js';
import { oneOf } from './sql.js';
import { toTask, type DbTask } from './tasks.js';

interface DbModelPull {
  task_id: string;
  model_id: string;
  source: string;
  url: string;
  models_dir: string;
  expected_digest: string | null;
  resume_url: string | null;
  resume_etag: string | null;
  resume_last_modified: string | null;
  total_bytes: number | null;
  resume_seen_etag: string | null;
  resume_seen_last_modified: string | null;
  resume_seen_kept: 0 | 1;
  digest: string | null;
  size_bytes: number | null;
}

function toModelPull(row: DbModelPull): ModelPull {
  return {
    taskId: row.task_id,
    modelId: row.model_id,
    source: row.source,
    url: row.url,
    modelsDir: row.models_dir,
    expectedDigest: row.expected_digest,
    resume: row.resume_url === null
      ? null
      : {
        url: row.resume_url, etag: row.resume_etag, lastModified: row.resume_last_modified, totalBytes: row.total_bytes,
        // Not kept in rows written before they were (download-plan.ts then compares the strong
        // ones); kept, both NULL means an answer without validators, whose bytes are not continued.
        ...(row.resume_seen_kept === 1 ? { seen: { etag: row.resume_seen_etag, lastModified: row.resume_seen_last_modified } } : {}),
      },
    digest: row.digest,
    sizeBytes: row.size_bytes,
  };
}

export class ModelPullTable {
  private readonly insertStatement;
  private readonly getStatement;
  private readonly setResumeStatement;
  private readonly setResultStatement;
  private readonly unfinishedForModelStatement;
  private readonly nextResumedStatement;
  private readonly oldestQueuedOfClientStatement;
  private readonly clientsWithQueuedStatement;

  constructor(db: Sqlite) {
    this.insertStatement = db.prepare(`
      INSERT INTO model_pulls (task_id, model_id, source, url, models_dir, expected_digest)
      VALUES (@task_id, @model_id, @source, @url, @models_dir, @expected_digest)`);
    this.getStatement = db.prepare<[string], DbModelPull>('SELECT * FROM model_pulls WHERE task_id = ?');
    this.setResumeStatement = db.prepare(`
      UPDATE model_pulls SET resume_url = @url, resume_etag = @etag, resume_last_modified = @last_modified, total_bytes = @total_bytes,
        resume_seen_etag = @seen_etag, resume_seen_last_modified = @seen_last_modified, resume_seen_kept = @seen_kept
      WHERE task_id = @task_id`);
    this.setResultStatement = db.prepare('UPDATE model_pulls SET digest = ?, size_bytes = ? WHERE task_id = ?');
    const pulls = oneOf('t.kind', PULL_KINDS);
    this.unfinishedForModelStatement = db.prepare<[string], number>(`
      SELECT count(*) FROM tasks t WHERE t.model = ? AND ${pulls} AND ${oneOf('t.status', UNFINISHED_STATUSES)}`).pluck();
    // The pull workers take resumed pulls (still running after a restart) first, then queued
    // ones fairly between clients (LMSP 16, tasks/fair-queue.ts).
    this.nextResumedStatement = db.prepare<[string], DbTask>(`
      SELECT * FROM tasks t WHERE ${pulls} AND t.status = 'running' AND t.id NOT IN (SELECT value FROM json_each(?))
      ORDER BY t.seq LIMIT 1`);
    this.oldestQueuedOfClientStatement = db.prepare<[string, string], DbTask>(`
      SELECT * FROM tasks t WHERE t.client_id = ? AND ${pulls} AND t.status = 'queued' AND t.id NOT IN (SELECT value FROM json_each(?))
      ORDER BY t.seq LIMIT 1`);
    this.clientsWithQueuedStatement = db.prepare<[], { client_id: string; first: number }>(`
      SELECT t.client_id, min(t.seq) AS first FROM tasks t WHERE ${pulls} AND t.status = 'queued' GROUP BY t.client_id ORDER BY first`);
  }

  insert(pull: ModelPull): void {
    this.insertStatement.run({
      task_id: pull.taskId, model_id: pull.modelId, source: pull.source, url: pull.url, models_dir: pull.modelsDir, expected_digest: pull.expectedDigest,
    });
  }

  get(taskId: string): ModelPull | null {
    const row = this.getStatement.get(taskId);
    return row ? toModelPull(row) : null;
  }

  /** Records the validator of the bytes about to be written (download.ts `onResumeState`). */
  setResumeState(taskId: string, state: PullResumeState | null): void {
    this.setResumeStatement.run({
      task_id: taskId, url: state?.url ?? null, etag: state?.etag ?? null, last_modified: state?.lastModified ?? null,
      total_bytes: state?.totalBytes ?? null, seen_etag: state?.seen?.etag ?? null, seen_last_modified: state?.seen?.lastModified ?? null,
      seen_kept: state?.seen ? 1 : 0,
    });
  }

  setResult(taskId: string, digest: string, sizeBytes: number): void {
    this.setResultStatement.run(digest, sizeBytes, taskId);
  }

  /** Unfinished pulls that will register `modelId`. */
  countUnfinishedForModel(modelId: string): number {
    return this.unfinishedForModelStatement.get(modelId)!;
  }

  /** A pull resumed at startup (still running) that no worker has taken yet. */
  nextResumed(claimed: Iterable<string>): Task | null {
    const row = this.nextResumedStatement.get(JSON.stringify([...claimed]));
    return row ? toTask(row) : null;
  }

  /** The oldest queued pull of a client, not one of `claimed`. */
  oldestQueuedOf(clientId: string, claimed: Iterable<string>): Task | null {
    const row = this.oldestQueuedOfClientStatement.get(clientId, JSON.stringify([...claimed]));
    return row ? toTask(row) : null;
  }

  /** The clients that have queued pulls, the one whose oldest queued pull is oldest first. */
  clientsWithQueuedTasks(): string[] {
    return this.clientsWithQueuedStatement.all().map((row) => row.client_id);
  }
}
