-- Multipart uploads (SQLite twin: migrations/sqlite/0002_multipart.sql).
-- The multipart side of an upload: one row per multipart upload, its state changed only by
-- conditional updates (open → completed | aborted).
CREATE TABLE multipart_sessions (
    upload_id    TEXT PRIMARY KEY REFERENCES uploads (id),
    s3_upload_id TEXT NOT NULL,
    total_size   BIGINT NOT NULL CHECK (total_size > 0),
    part_size    BIGINT NOT NULL CHECK (part_size > 0),
    part_count   BIGINT NOT NULL CHECK (part_count BETWEEN 1 AND 10000),
    state        TEXT NOT NULL CHECK (state IN ('open', 'completed', 'aborted')),
    created_at   TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX multipart_sessions_state_expires ON multipart_sessions (state, expires_at);

-- One row per part S3 holds, keyed by (upload, part number): a part is written once and
-- overwritten in place, never appended to a growing blob. Listing one upload's parts is a
-- primary-key range scan in numeric order.
CREATE TABLE upload_parts (
    upload_id   TEXT NOT NULL REFERENCES multipart_sessions (upload_id),
    part_number BIGINT NOT NULL CHECK (part_number BETWEEN 1 AND 10000),
    etag        TEXT NOT NULL,
    size        BIGINT NOT NULL CHECK (size >= 0),
    checksum    TEXT,
    recorded_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (upload_id, part_number)
);
