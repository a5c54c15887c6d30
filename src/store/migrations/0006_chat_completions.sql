-- LMSP 13: chat completions, the records behind tasks of kind `chat_completion`. `request` holds
-- what the generation is asked for (sampling, stop, format, tools) as JSON, `messages` the
-- conversation as the client sent it; `output_text` and `tool_calls` are set when the task
-- finishes. `seq` is the creation order, the cursor of GET /v1/chat/completions.

CREATE TABLE chat_completions (
  seq                INTEGER PRIMARY KEY,
  id                 TEXT NOT NULL UNIQUE,
  client_id          TEXT NOT NULL,
  model              TEXT NOT NULL,
  created_at         INTEGER NOT NULL,
  stream             INTEGER NOT NULL CHECK (stream = 0 OR stream = 1),
  store              INTEGER NOT NULL CHECK (store = 0 OR store = 1),
  include_usage      INTEGER NOT NULL CHECK (include_usage = 0 OR include_usage = 1),
  system_fingerprint TEXT NOT NULL,
  metadata           TEXT NOT NULL,
  request            TEXT NOT NULL,
  messages           TEXT NOT NULL,
  output_text        TEXT,
  tool_calls         TEXT
);

-- Stored completions of one client, in creation order (the list); `store: false` ones never listed.
CREATE INDEX chat_completions_stored_by_client ON chat_completions (client_id, seq) WHERE store = 1;
-- `store: false` completions: the sweeper finds the finished ones left by a crash.
CREATE INDEX chat_completions_ephemeral ON chat_completions (id) WHERE store = 0;
