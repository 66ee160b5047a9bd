-- SQLite twin of migrations/postgres/0004_links.sql.
-- File handles gain a status (available → unlinked → archived → deleted; restore goes back to
-- available) and may share a key (copies), so the key is no longer unique. SQLite cannot drop a
-- constraint: the table is rebuilt with the same rows.
CREATE TABLE file_handles_v2 (
    id                TEXT PRIMARY KEY,
    upload_id         TEXT NOT NULL UNIQUE REFERENCES uploads (id),
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
    storage_class     TEXT NOT NULL DEFAULT 'STANDARD'
);
INSERT INTO file_handles_v2 (id, upload_id, key, size, content_type, etag, profile, created_by, created_at)
    SELECT id, upload_id, key, size, content_type, etag, profile, created_by, created_at FROM file_handles;
DROP TABLE file_handles;
ALTER TABLE file_handles_v2 RENAME TO file_handles;
CREATE INDEX file_handles_key ON file_handles (key);
CREATE INDEX file_handles_created_by ON file_handles (created_by, created_at);
CREATE INDEX file_handles_status ON file_handles (status, id);

-- Where the application uses a file: one row per (file, object), written and removed
-- idempotently.
CREATE TABLE file_links (
    file_id     TEXT NOT NULL REFERENCES file_handles (id),
    object_type TEXT NOT NULL,
    object_id   TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (file_id, object_type, object_id)
);

-- Bulk link scans for applications that cannot keep links exact: the files seen in each
-- scan, received in numbered batches (a batch received twice counts once).
CREATE TABLE link_scans (
    id           TEXT PRIMARY KEY,
    state        TEXT NOT NULL CHECK (state IN ('open', 'completed')),
    started_at   TEXT NOT NULL,
    completed_at TEXT
);
CREATE TABLE link_scan_batches (
    scan_id     TEXT NOT NULL REFERENCES link_scans (id),
    n           BIGINT NOT NULL,
    files       BIGINT NOT NULL,
    received_at TEXT NOT NULL,
    PRIMARY KEY (scan_id, n)
);
CREATE TABLE link_scan_seen (
    scan_id TEXT NOT NULL REFERENCES link_scans (id),
    file_id TEXT NOT NULL,
    PRIMARY KEY (scan_id, file_id)
);
