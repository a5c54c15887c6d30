-- LMSP 8: each key's own time to live, counted again from its answer or from the end of its
-- task when either comes later than its expiry (the expiry moves then, so it no longer tells the
-- time to live). NULL in rows written before: their expiry never moved, and expires_at -
-- created_at is their time to live.
ALTER TABLE idempotency_keys ADD COLUMN ttl_seconds INTEGER;
