-- Idempotent uploads: the SHA-256 of the stored record (without its uploader),
-- unique, so the same run uploaded twice is stored once. Runs stored before
-- this migration have none (NULL, which a unique index never matches).
ALTER TABLE runs ADD COLUMN content_hash TEXT;
CREATE UNIQUE INDEX runs_content_hash ON runs (content_hash);
