-- SQLite evaluates `x IN (a, b, c)` over more than two constants by building a temporary index,
-- and a CHECK constraint or a partial-index predicate is evaluated on every write of the row:
-- each INSERT or UPDATE of a task built and freed three small temporary b-trees, each with its
-- own page cache. Besides the work, the ~90 KB allocated and freed per statement could sit at the
-- top of the C heap and make glibc return and re-request memory from the kernel on every write
-- (recovery of 100,000 tasks measured 17 s instead of 2.4 s when it did). Same rules, written as
-- comparisons: the table is rebuilt with its rows, ids and indexes unchanged.

CREATE TABLE tasks_rebuilt (
  seq                  INTEGER PRIMARY KEY,  -- creation order (FIFO scheduling, list cursors)
  id                   TEXT NOT NULL UNIQUE,
  kind                 TEXT NOT NULL DEFAULT 'response',
  response_id          TEXT NOT NULL UNIQUE,
  client_id            TEXT NOT NULL,
  model                TEXT NOT NULL,
  status               TEXT NOT NULL CHECK (status = 'queued' OR status = 'loading' OR status = 'running'
                         OR status = 'cancelling' OR status = 'completed' OR status = 'failed' OR status = 'cancelled'),
  on_restart           TEXT NOT NULL CHECK (on_restart = 'fail' OR on_restart = 'retry' OR on_restart = 'resume'),
  attempt              INTEGER NOT NULL DEFAULT 1,
  restarts             INTEGER NOT NULL DEFAULT 0,  -- times found loading or running at startup
  created_at           INTEGER NOT NULL,
  started_at           INTEGER,
  finished_at          INTEGER,
  last_sequence_number INTEGER NOT NULL DEFAULT 0,
  output_start_seq     INTEGER NOT NULL DEFAULT 0,  -- output of this attempt is in events after it
  input_tokens         INTEGER,
  output_tokens        INTEGER NOT NULL DEFAULT 0,
  finish_reason        TEXT,                        -- 'stop' | 'max_output_tokens'
  error_code           TEXT,
  error_message        TEXT
);

INSERT INTO tasks_rebuilt (seq, id, kind, response_id, client_id, model, status, on_restart, attempt, restarts,
    created_at, started_at, finished_at, last_sequence_number, output_start_seq, input_tokens, output_tokens,
    finish_reason, error_code, error_message)
  SELECT seq, id, kind, response_id, client_id, model, status, on_restart, attempt, restarts,
    created_at, started_at, finished_at, last_sequence_number, output_start_seq, input_tokens, output_tokens,
    finish_reason, error_code, error_message
  FROM tasks;

DROP TABLE tasks;
ALTER TABLE tasks_rebuilt RENAME TO tasks;

-- Unfinished tasks, for the scheduler and for recovery; finished tasks by age, for the sweeper.
CREATE INDEX tasks_unfinished ON tasks (status, seq, on_restart)
  WHERE status = 'queued' OR status = 'loading' OR status = 'running' OR status = 'cancelling';
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX tasks_by_client ON tasks (client_id, seq);
