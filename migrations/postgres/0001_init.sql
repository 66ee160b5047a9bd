-- Uploads: one row per presign. State changes are conditional updates checked with
-- rows_affected; uniqueness is enforced here, never by read-then-write.
CREATE TABLE uploads (
    id              TEXT PRIMARY KEY,
    owner           TEXT NOT NULL,
    profile         TEXT NOT NULL,
    content_type    TEXT NOT NULL,
    declared_size   BIGINT NOT NULL CHECK (declared_size > 0),
    key             TEXT NOT NULL UNIQUE,
    method          TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('issued', 'promoting', 'committed', 'rejected')),
    -- Set when a commit takes the upload; unique, so two uploads can never aim at one key.
    final_key       TEXT UNIQUE,
    reject_code     TEXT,
    lease_token     TEXT,
    lease_until     TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    commit_deadline TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX uploads_state_created ON uploads (state, created_at);
CREATE INDEX uploads_owner_created ON uploads (owner, created_at);

-- File handles: one per committed upload.
CREATE TABLE file_handles (
    id           TEXT PRIMARY KEY,
    upload_id    TEXT NOT NULL UNIQUE REFERENCES uploads (id),
    key          TEXT NOT NULL UNIQUE,
    size         BIGINT NOT NULL,
    content_type TEXT NOT NULL,
    etag         TEXT NOT NULL,
    profile      TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX file_handles_created_by ON file_handles (created_by, created_at);

-- Daily quota ledger: charged atomically at presign.
CREATE TABLE quota_usage (
    owner   TEXT NOT NULL,
    day     TEXT NOT NULL,
    uploads BIGINT NOT NULL,
    bytes   BIGINT NOT NULL,
    PRIMARY KEY (owner, day)
);
