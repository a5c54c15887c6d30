/** Stored tasks counted by kind and status, for the `lmsp_tasks` gauge (LMSP 15). */
import type { TaskStatus } from '../domain/tasks.js';
import type { Sqlite } from './db.js';

export interface TaskCount {
  kind: string;
  status: TaskStatus;
  count: number;
}

export class TaskCountTable {
  private readonly byKindAndStatusStatement;

  constructor(db: Sqlite) {
    // One grouped pass over the covering index tasks_by_kind_and_status (migration 0003), at scrape time only.
    this.byKindAndStatusStatement = db.prepare<[], TaskCount>(
      'SELECT kind, status, count(*) AS count FROM tasks GROUP BY kind, status');
  }

  byKindAndStatus(): TaskCount[] {
    return this.byKindAndStatusStatement.all();
  }
}
