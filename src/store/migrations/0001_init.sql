-- LMSP 11.1: the seven tables of the suggested layout, plus pairing codes (section 4).
-- Migrations are only ever added, never edited: a new file per change.

CREATE TABLE service_config (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE clients (
  id           TEXT PRIMARY KEY,
  name         TEXT NOT NULL,
  scopes       TEXT NOT NULL,              -- space separated
  token_hash   BLOB NOT NULL UNIQUE,       -- SHA-256 of the token; the token itself is never stored
  kind         TEXT NOT NULL DEFAULT 'paired' CHECK (kind IN ('paired', 'operator')),
  created_at   INTEGER NOT NULL,
  last_used_at INTEGER,
  revoked_at   INTEGER
);

CREATE TABLE pairing_codes (
  code_hash  BLOB PRIMARY KEY,             -- SHA-256 of the normalised code
  name       TEXT,
  scopes     TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at    INTEGER,
  client_id  TEXT
) WITHOUT ROWID;

CREATE TABLE models (
  id             TEXT PRIMARY KEY,
  path           TEXT NOT NULL,
  digest         TEXT NOT NULL,            -- sha256:<hex> of the whole file
  size_bytes     INTEGER NOT NULL,
  mtime_ms       INTEGER NOT NULL,
  architecture   TEXT,
  context_length INTEGER,
  parameters     INTEGER,
  quantization   TEXT,
  tokenizer      TEXT,
  status         TEXT NOT NULL DEFAULT 'ready' CHECK (status IN ('ready', 'missing', 'digest_mismatch')),
  builtin        INTEGER NOT NULL DEFAULT 0,
  created_at     INTEGER NOT NULL,
  verified_at    INTEGER
);

CREATE TABLE responses (
  id                   TEXT PRIMARY KEY,
  client_id            TEXT NOT NULL,
  model                TEXT NOT NULL,
  created_at           INTEGER NOT NULL,
  background           INTEGER NOT NULL,
  stream               INTEGER NOT NULL,
  store                INTEGER NOT NULL,
  instructions         TEXT,
  previous_response_id TEXT,
  max_output_tokens    INTEGER NOT NULL,
  temperature          REAL NOT NULL,
  top_p                REAL NOT NULL,
  seed                 INTEGER NOT NULL,
  metadata             TEXT NOT NULL,      -- JSON object of string pairs
  input_items          TEXT NOT NULL,      -- JSON: this request's input as messages
  context              TEXT NOT NULL,      -- JSON: every message the model sees, in order
  output_item_id       TEXT NOT NULL,
  output_text          TEXT                -- the final text, written when the task finishes
);
-- `store: false` responses are deleted as soon as they finish; the sweeper finds leftovers here.
CREATE INDEX responses_ephemeral ON responses (id) WHERE store = 0;

CREATE TABLE tasks (
  seq                  INTEGER PRIMARY KEY,  -- creation order (FIFO scheduling, list cursors)
  id                   TEXT NOT NULL UNIQUE,
  kind                 TEXT NOT NULL DEFAULT 'response',
  response_id          TEXT NOT NULL UNIQUE,
  client_id            TEXT NOT NULL,
  model                TEXT NOT NULL,
  status               TEXT NOT NULL CHECK (status IN
                         ('queued', 'loading', 'running', 'cancelling', 'completed', 'failed', 'cancelled')),
  on_restart           TEXT NOT NULL CHECK (on_restart IN ('fail', 'retry', 'resume')),
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

-- Unfinished tasks, for the scheduler and for recovery; finished tasks by age, for the sweeper.
CREATE INDEX tasks_unfinished ON tasks (status, seq, on_restart)
  WHERE status IN ('queued', 'loading', 'running', 'cancelling');
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX tasks_by_client ON tasks (client_id, seq);

CREATE TABLE task_events (
  task_id         TEXT NOT NULL,
  sequence_number INTEGER NOT NULL,
  type            TEXT NOT NULL,
  created_at      INTEGER NOT NULL,
  data            TEXT NOT NULL,   -- JSON payload, without sequence_number, type and created_at
  tokens          BLOB,            -- delta events: the token ids they cover (the resume snapshot)
  PRIMARY KEY (task_id, sequence_number)
) WITHOUT ROWID;

CREATE TABLE idempotency_keys (
  scope        TEXT NOT NULL,      -- 'client:<id>' or 'pair:<code hash>'
  key          TEXT NOT NULL,
  fingerprint  TEXT NOT NULL,      -- SHA-256 of method, path and canonical body
  state        TEXT NOT NULL CHECK (state IN ('in_flight', 'done')),
  status_code  INTEGER,
  body         TEXT,
  task_id      TEXT,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  PRIMARY KEY (scope, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
