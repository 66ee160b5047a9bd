-- Terminal upload rows are pruned after a retention period (services::prune); a file handle
-- keeps its upload id (an idempotent commit retry finds the handle by it) but no longer needs
-- the upload row (SQLite twin: migrations/sqlite/0009_upload_retention.sql).
ALTER TABLE file_handles DROP CONSTRAINT file_handles_upload_id_fkey;
