-- One schema for SQLite and PostgreSQL: only types and statements both accept
-- (TEXT, BIGINT, DOUBLE PRECISION; timestamps as RFC 3339 text, which sorts).
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    uploaded_at TEXT NOT NULL,
    uploader TEXT NOT NULL,
    model TEXT NOT NULL,
    gpu TEXT NOT NULL,
    gpu_count BIGINT NOT NULL,
    engine TEXT NOT NULL,
    engine_version TEXT NOT NULL,
    measured_at TEXT NOT NULL,
    label TEXT NOT NULL,
    status TEXT NOT NULL,
    peak_tok_s DOUBLE PRECISION NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX runs_model ON runs (model);
CREATE INDEX runs_gpu ON runs (gpu, gpu_count);
CREATE INDEX runs_engine ON runs (engine, engine_version);
CREATE INDEX runs_measured_at ON runs (measured_at);
CREATE INDEX runs_uploaded_at ON runs (uploaded_at);
CREATE INDEX runs_uploader ON runs (uploader);
CREATE INDEX runs_label ON runs (label);
CREATE TABLE tokens (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
