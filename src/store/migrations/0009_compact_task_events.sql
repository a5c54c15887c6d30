-- Storage per generated token (LMSP 7.3, 7.5). A delta event used to be a row of its own JSON
-- payload: the type, the item id and indexes repeated in every delta, around a few bytes of text,
-- and the token ids as 4-byte integers. Now:
--
-- * a task's deltas of one type share a shape (`task_event_shapes`): their JSON payload with one
--   string left out (the hole), stored once per task and type; a delta's row keeps only the
--   string that fills the hole (in `data`) and the shape's id, with `type` left NULL;
-- * token ids are unsigned LEB128 varints (src/store/token-codec.ts), about 2 bytes a token.
--
-- Any other event, and any delta that does not fit its task's shape, is stored as before: its
-- type and its whole payload. The events a client reads are rebuilt from the shape byte for byte
-- (src/store/events.ts). Existing rows are copied as they were, their tokens re-encoded by
-- `lmsp_tokens_from_fixed_width`, which the database layer registers before migrating.
--
-- `task_events` stays readable under its old name and columns as a view, for tools and checks
-- that read the log with SQL; the service writes and reads `task_log` and the shapes directly.

CREATE TABLE task_event_shapes (
  id      INTEGER PRIMARY KEY,
  task_id TEXT NOT NULL,
  type    TEXT NOT NULL,
  prefix  TEXT NOT NULL,   -- the payload's JSON text before the hole
  suffix  TEXT NOT NULL,   -- and after it
  path    TEXT NOT NULL,   -- JSON path of the hole, e.g. $.delta
  UNIQUE (task_id, type)
);

CREATE TABLE task_log (
  task_id         TEXT NOT NULL,
  sequence_number INTEGER NOT NULL,
  created_at      INTEGER NOT NULL,
  type            TEXT,             -- NULL when `shape` is set: the shape's type
  shape           INTEGER,          -- task_event_shapes.id: then `data` is the string of the hole
  data            TEXT NOT NULL,    -- otherwise the JSON payload, without sequence_number, type and created_at
  tokens          BLOB,             -- delta events: the token ids they cover, as varints (the resume snapshot)
  PRIMARY KEY (task_id, sequence_number)
) WITHOUT ROWID;

INSERT INTO task_log (task_id, sequence_number, created_at, type, shape, data, tokens)
  SELECT task_id, sequence_number, created_at, type, NULL, data, lmsp_tokens_from_fixed_width(tokens)
  FROM task_events;

DROP TABLE task_events;

CREATE VIEW task_events (task_id, sequence_number, type, created_at, data, tokens) AS
  SELECT l.task_id, l.sequence_number, coalesce(l.type, s.type), l.created_at,
    CASE WHEN l.shape IS NULL THEN l.data ELSE s.prefix || json_quote(l.data) || s.suffix END, l.tokens
  FROM task_log l LEFT JOIN task_event_shapes s ON s.id = l.shape;

CREATE TRIGGER task_events_insert INSTEAD OF INSERT ON task_events BEGIN
  INSERT INTO task_log (task_id, sequence_number, created_at, type, shape, data, tokens)
    VALUES (NEW.task_id, NEW.sequence_number, NEW.created_at, NEW.type, NULL, NEW.data, NEW.tokens);
END;

CREATE TRIGGER task_events_delete INSTEAD OF DELETE ON task_events BEGIN
  DELETE FROM task_log WHERE task_id = OLD.task_id AND sequence_number = OLD.sequence_number;
END;
