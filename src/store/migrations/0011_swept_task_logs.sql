-- LMSP 10: the sweeper deletes at most 1000 rows a transaction. A task whose log is longer was
-- swept event by event before its row, so for a while (for good, after a crash and a longer
-- retention) it was readable with the start of its log gone. Such a task's row now goes first,
-- in one transaction with its response, and its log is listed here until later batches have
-- deleted it; a task that is gone is never read again, so nothing half-deleted is visible.
CREATE TABLE swept_task_logs (
  task_id TEXT PRIMARY KEY
) WITHOUT ROWID;
