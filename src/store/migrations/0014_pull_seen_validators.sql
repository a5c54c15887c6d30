-- LMSP 5.1: the ETag and Last-Modified of the answer a pull's bytes on disk came from, exactly as
-- sent, weak or strong. A resumed range answer must carry the same ones (download-plan.ts): a weak
-- ETag cannot be sent as If-Range and a server may ignore If-Range, so only this comparison tells
-- a changed file from the same one. Both NULL in rows written before: the strong validators of
-- resume_etag and resume_last_modified are compared instead.
ALTER TABLE model_pulls ADD COLUMN resume_seen_etag TEXT;
ALTER TABLE model_pulls ADD COLUMN resume_seen_last_modified TEXT;
