-- File handles gain a status and may share a key (SQLite twin: migrations/sqlite/0004_links.sql).
ALTER TABLE file_handles DROP CONSTRAINT file_handles_key_key;
CREATE INDEX file_handles_key ON file_handles (key);
ALTER TABLE file_handles ADD COLUMN status TEXT NOT NULL DEFAULT 'available'
    CHECK (status IN ('available', 'unlinked', 'archived', 'deleted'));
ALTER TABLE file_handles ADD COLUMN status_changed_at TIMESTAMPTZ;
ALTER TABLE file_handles ADD COLUMN restored_at TIMESTAMPTZ;
ALTER TABLE file_handles ADD COLUMN storage_class TEXT NOT NULL DEFAULT 'STANDARD';
CREATE INDEX file_handles_status ON file_handles (status, id);

-- Where the application uses a file: one row per (file, object).
CREATE TABLE file_links (
    file_id     TEXT NOT NULL REFERENCES file_handles (id),
    object_type TEXT NOT NULL,
    object_id   TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (file_id, object_type, object_id)
);

-- Bulk link scans: the files seen in each scan, received in numbered batches.
CREATE TABLE link_scans (
    id           TEXT PRIMARY KEY,
    state        TEXT NOT NULL CHECK (state IN ('open', 'completed')),
    started_at   TIMESTAMPTZ NOT NULL,
    completed_at TIMESTAMPTZ
);
CREATE TABLE link_scan_batches (
    scan_id     TEXT NOT NULL REFERENCES link_scans (id),
    n           BIGINT NOT NULL,
    files       BIGINT NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (scan_id, n)
);
CREATE TABLE link_scan_seen (
    scan_id TEXT NOT NULL REFERENCES link_scans (id),
    file_id TEXT NOT NULL,
    PRIMARY KEY (scan_id, file_id)
);
