-- Maintenance jobs (SQLite twin: migrations/sqlite/0003_jobs.sql): one row per run with its
-- checkpoint and summary, one row per reported item, and one lease row per job so only one
-- replica runs a job at a time.
CREATE TABLE job_runs (
    id          TEXT PRIMARY KEY,
    job         TEXT NOT NULL,
    dry_run     BOOLEAN NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('running', 'finished', 'failed', 'refused')),
    checkpoint  TEXT,
    summary     TEXT,
    started_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ
);
CREATE INDEX job_runs_job_started ON job_runs (job, started_at);

CREATE TABLE job_items (
    id         BIGSERIAL PRIMARY KEY,
    run_id     TEXT NOT NULL REFERENCES job_runs (id),
    action     TEXT NOT NULL,
    key        TEXT NOT NULL,
    version_id TEXT,
    bytes      BIGINT NOT NULL,
    reason     TEXT NOT NULL
);
CREATE INDEX job_items_run ON job_items (run_id, id);

CREATE TABLE job_locks (
    job    TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until  TIMESTAMPTZ NOT NULL
);

-- Set when the sweeper removed an abandoned upload's tmp object.
ALTER TABLE uploads ADD COLUMN swept_at TIMESTAMPTZ;

-- Reconcile walks handle keys in S3's byte order; "C" collation is byte order.
CREATE INDEX file_handles_key_bytes ON file_handles (key COLLATE "C");
