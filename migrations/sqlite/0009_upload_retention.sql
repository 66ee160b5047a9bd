-- SQLite twin of migrations/postgres/0009_upload_retention.sql.
-- Terminal upload rows are pruned after a retention period (services::prune); a file handle
-- keeps its upload id (an idempotent commit retry finds the handle by it) but no longer
-- needs the upload row, so the foreign key from file_handles to uploads goes.
-- SQLite cannot drop a constraint and sqlx runs this in a transaction, where
-- `PRAGMA foreign_keys = OFF` is a no-op: the table is rebuilt with its constraints deferred
-- to the commit instead (dropping it counts each file_links row as a violation, inserting the
-- rows back counts them off again), so the links that point at handles still hold.
-- The rebuild names every column file_handles has after 0001–0008 (0008's checksums included).
PRAGMA defer_foreign_keys = ON;
CREATE TABLE file_handles_old AS SELECT * FROM file_handles;
DROP TABLE file_handles;
CREATE TABLE file_handles (
    id                TEXT PRIMARY KEY,
    upload_id         TEXT NOT NULL UNIQUE,
    key               TEXT NOT NULL,
    size              BIGINT NOT NULL,
    content_type      TEXT NOT NULL,
    etag              TEXT NOT NULL,
    profile           TEXT NOT NULL,
    created_by        TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    status            TEXT NOT NULL DEFAULT 'available'
                      CHECK (status IN ('available', 'unlinked', 'archived', 'deleted')),
    status_changed_at TEXT,
    restored_at       TEXT,
    storage_class     TEXT NOT NULL DEFAULT 'STANDARD',
    original_filename TEXT,
    claim             TEXT CHECK (claim IN ('archive', 'delete', 'restore')),
    claim_token       TEXT,
    claim_until       TEXT,
    link_count        BIGINT NOT NULL DEFAULT 0,
    checksum_algorithm TEXT,
    checksum_value    TEXT
);
INSERT INTO file_handles (id, upload_id, key, size, content_type, etag, profile, created_by,
                          created_at, status, status_changed_at, restored_at, storage_class,
                          original_filename, claim, claim_token, claim_until, link_count,
                          checksum_algorithm, checksum_value)
    SELECT id, upload_id, key, size, content_type, etag, profile, created_by,
           created_at, status, status_changed_at, restored_at, storage_class,
           original_filename, claim, claim_token, claim_until, link_count,
           checksum_algorithm, checksum_value
    FROM file_handles_old;
DROP TABLE file_handles_old;
CREATE INDEX file_handles_key ON file_handles (key);
CREATE INDEX file_handles_created_by ON file_handles (created_by, created_at);
CREATE INDEX file_handles_status ON file_handles (status, id);
