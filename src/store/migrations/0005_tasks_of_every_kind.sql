-- LMSP 7.1: a task is a response's, a chat completion's (`completion_id`) or a model pull's (neither),
-- so `response_id` becomes nullable and `completion_id` joins it; each is unique where present.
-- The table is rebuilt with its rows, ids and indexes (SQLite cannot drop a NOT NULL in place);
-- CHECKs stay comparisons, never IN lists (see 0002). `kind` is left unchecked: the vocabulary
-- (src/domain/tasks.ts) says which kinds exist, and a new kind needs no rebuild.

CREATE TABLE tasks_rebuilt (
  seq                  INTEGER PRIMARY KEY,  -- creation order (scheduling, list cursors)
  id                   TEXT NOT NULL UNIQUE,
  kind                 TEXT NOT NULL DEFAULT 'response',
  response_id          TEXT UNIQUE,          -- kind response
  completion_id        TEXT UNIQUE,          -- kind chat_completion
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
  finish_reason        TEXT,
  error_code           TEXT,
  error_message        TEXT
);

INSERT INTO tasks_rebuilt (seq, id, kind, response_id, completion_id, client_id, model, status, on_restart, attempt, restarts,
    created_at, started_at, finished_at, last_sequence_number, output_start_seq, input_tokens, output_tokens,
    finish_reason, error_code, error_message)
  SELECT seq, id, kind, response_id, NULL, client_id, model, status, on_restart, attempt, restarts,
    created_at, started_at, finished_at, last_sequence_number, output_start_seq, input_tokens, output_tokens,
    finish_reason, error_code, error_message
  FROM tasks;

DROP TABLE tasks;
ALTER TABLE tasks_rebuilt RENAME TO tasks;

CREATE INDEX tasks_unfinished ON tasks (status, seq, on_restart)
  WHERE status = 'queued' OR status = 'loading' OR status = 'running' OR status = 'cancelling';
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX tasks_by_client ON tasks (client_id, seq);
CREATE INDEX tasks_unfinished_by_client ON tasks (client_id, status, seq)
  WHERE status = 'queued' OR status = 'loading' OR status = 'running' OR status = 'cancelling';
CREATE INDEX tasks_by_kind_and_status ON tasks (kind, status);
