-- Temporary files (SQLite twin: migrations/sqlite/0011_temporary_files.sql).
-- expires_at: a temporary profile's file stops being served then (commit time + the profile's
-- TTL); NULL on ordinary files and on every row written before this migration.
-- expired_at: when the sweep marked the handle expired. The handle's status reads `expired`
-- from then on (the catalog derives it from this column): SQLite cannot widen the status
-- column's CHECK without rebuilding the table, and migration 0010 may rebuild that table for
-- another reason, so this one only adds columns, the same on both backends.
ALTER TABLE file_handles ADD COLUMN expires_at TIMESTAMPTZ;
ALTER TABLE file_handles ADD COLUMN expired_at TIMESTAMPTZ;
-- The sweep's batches read the temporary handles not yet marked, oldest expiry first.
CREATE INDEX file_handles_expiring ON file_handles (expires_at)
    WHERE expires_at IS NOT NULL AND expired_at IS NULL;
