-- Terminal upload rows are pruned after a retention period (services::prune); a file handle
-- keeps its upload id (an idempotent commit retry finds the handle by it) but no longer needs
-- the upload row (SQLite twin: migrations/sqlite/0009_upload_retention.sql).
ALTER TABLE file_handles DROP CONSTRAINT file_handles_upload_id_fkey;

-- Reconcile reads handle keys in byte order (COLLATE "C") a page at a time: an index in that
-- order makes each page a range scan whatever the database's default collation.
CREATE INDEX file_handles_key_c ON file_handles (key COLLATE "C");
