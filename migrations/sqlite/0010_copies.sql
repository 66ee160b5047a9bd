-- Shared handles (PostgreSQL twin: migrations/postgres/0010_copies.sql): a copy is a second
-- handle of an existing object (`POST /v1/files/{id}/copies`), with its own owner, links and
-- status. It keeps the upload id of the handle it was copied from (the upload that put the
-- bytes in the bucket) and names that handle in `copied_from`; only the handle a commit made
-- (`copied_from IS NULL`) is unique per upload, so a commit retry still finds exactly its own.
-- Keys were already shared (0004): several handles may name one key.
--
-- SQLite cannot drop the UNIQUE on upload_id in place: the table is rebuilt as in 0009, its
-- foreign-key checks deferred to the commit (file_links points at it).
-- The rebuild names every column file_handles has after 0001–0009.
PRAGMA defer_foreign_keys = ON;
CREATE TABLE file_handles_old AS SELECT * FROM file_handles;
DROP TABLE file_handles;
CREATE TABLE file_handles (
    id                TEXT PRIMARY KEY,
    upload_id         TEXT NOT NULL,
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
    checksum_value    TEXT,
    copied_from       TEXT
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
CREATE UNIQUE INDEX file_handles_upload ON file_handles (upload_id) WHERE copied_from IS NULL;
CREATE INDEX file_handles_key ON file_handles (key);
CREATE INDEX file_handles_created_by ON file_handles (created_by, created_at);
CREATE INDEX file_handles_status ON file_handles (status, id);
