-- The admin API's reads (SQLite twin: migrations/sqlite/0015_admin_reads.sql; PostgreSQL twin:
-- migrations/postgres/0015_admin_reads.sql): file handles newest first (GET /v1/admin/files),
-- a file's events (GET /v1/admin/files/{id}), the job history newest first
-- (GET /v1/admin/jobs/runs) and its retention (upcommit prune).
CREATE INDEX file_handles_created ON file_handles (created_at, id);
CREATE INDEX events_subject ON events (subject, seq);
CREATE INDEX job_runs_started ON job_runs (started_at, id);
