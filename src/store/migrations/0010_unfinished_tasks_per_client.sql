-- LMSP 16: every create checks the client's unfinished tasks against its cap, inside the create's
-- transaction. Counting them (tasks_unfinished_by_client) costs a step per unfinished task, so a
-- create got slower with every task queued before it: under load it was most of a create's time.
-- The count is kept instead, by triggers on every way a task enters or leaves the unfinished
-- statuses, so the check reads one row and stays exact in the same transaction.
-- A migration that rebuilds the tasks table must create these triggers again.
CREATE TABLE unfinished_tasks_per_client (
  client_id TEXT PRIMARY KEY,
  count INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO unfinished_tasks_per_client (client_id, count)
  SELECT client_id, count(*) FROM tasks
  WHERE status = 'queued' OR status = 'loading' OR status = 'running' OR status = 'cancelling'
  GROUP BY client_id;

CREATE TRIGGER tasks_unfinished_count_on_insert AFTER INSERT ON tasks
  WHEN (NEW.status = 'queued' OR NEW.status = 'loading' OR NEW.status = 'running' OR NEW.status = 'cancelling')
BEGIN
  INSERT INTO unfinished_tasks_per_client (client_id, count) VALUES (NEW.client_id, 1)
    ON CONFLICT (client_id) DO UPDATE SET count = count + 1;
END;

CREATE TRIGGER tasks_unfinished_count_on_finish AFTER UPDATE OF status ON tasks
  WHEN (OLD.status = 'queued' OR OLD.status = 'loading' OR OLD.status = 'running' OR OLD.status = 'cancelling') AND NOT (NEW.status = 'queued' OR NEW.status = 'loading' OR NEW.status = 'running' OR NEW.status = 'cancelling')
BEGIN
  UPDATE unfinished_tasks_per_client SET count = count - 1 WHERE client_id = OLD.client_id;
END;

CREATE TRIGGER tasks_unfinished_count_on_reopen AFTER UPDATE OF status ON tasks
  WHEN (NEW.status = 'queued' OR NEW.status = 'loading' OR NEW.status = 'running' OR NEW.status = 'cancelling') AND NOT (OLD.status = 'queued' OR OLD.status = 'loading' OR OLD.status = 'running' OR OLD.status = 'cancelling')
BEGIN
  INSERT INTO unfinished_tasks_per_client (client_id, count) VALUES (NEW.client_id, 1)
    ON CONFLICT (client_id) DO UPDATE SET count = count + 1;
END;

CREATE TRIGGER tasks_unfinished_count_on_delete AFTER DELETE ON tasks
  WHEN (OLD.status = 'queued' OR OLD.status = 'loading' OR OLD.status = 'running' OR OLD.status = 'cancelling')
BEGIN
  UPDATE unfinished_tasks_per_client SET count = count - 1 WHERE client_id = OLD.client_id;
END;
