-- LMSP 16: fair scheduling between clients and a cap on each client's unfinished tasks. Both
-- look up one client's unfinished tasks: its oldest queued one (round robin, FIFO within a
-- client) and how many it has. A partial index holds just those rows, however many finished
-- tasks a client has kept.
CREATE INDEX tasks_unfinished_by_client ON tasks (client_id, status, seq)
  WHERE status = 'queued' OR status = 'loading' OR status = 'running' OR status = 'cancelling';
