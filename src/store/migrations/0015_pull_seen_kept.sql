-- LMSP 5.1: whether resume_seen_etag and resume_seen_last_modified were kept with the bytes on
-- disk. Both NULL means "the answer had neither" when they were (such bytes cannot be shown to
-- be of the same file, and are never continued), and "not kept yet" in rows written before 0014,
-- where the strong validators of resume_etag and resume_last_modified are compared instead.
ALTER TABLE model_pulls ADD COLUMN resume_seen_kept INTEGER NOT NULL DEFAULT 0;
