-- LMSP 5.1: what a `model_pull` task fetches, and what a restart needs to continue it with a range
-- request. The partial file itself (`<model_id>.gguf.partial`) is the rest of the state: its size
-- says where a resume starts, and its bytes are re-hashed then (a SHA-256 state cannot be saved).
-- The row goes with its task (retention, DELETE): the trigger, since foreign keys are off.

CREATE TABLE model_pulls (
  task_id              TEXT PRIMARY KEY,
  model_id             TEXT NOT NULL,
  source               TEXT NOT NULL,        -- as the client sent it (hf:... or https://...)
  url                  TEXT NOT NULL,        -- what it resolved to when the pull was created
  models_dir           TEXT NOT NULL,        -- where the file is written: a restart continues there
  expected_digest      TEXT,                 -- sha256:<hex>, or NULL
  resume_url           TEXT,                 -- the validator of the bytes on disk (download-plan.ts ResumeState)
  resume_etag          TEXT,
  resume_last_modified TEXT,
  total_bytes          INTEGER,
  digest               TEXT,                 -- the digest of the finished file
  size_bytes           INTEGER
) WITHOUT ROWID;

CREATE INDEX model_pulls_by_model ON model_pulls (model_id);

CREATE TRIGGER model_pulls_follow_tasks AFTER DELETE ON tasks
BEGIN
  DELETE FROM model_pulls WHERE task_id = old.id;
END;
