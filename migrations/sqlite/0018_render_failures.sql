-- SQLite twin of migrations/postgres/0018_render_failures.sql.
CREATE TABLE render_failures (
    file_id TEXT NOT NULL,
    variant TEXT NOT NULL,
    -- The bytes, as the store names them (ETag:size): the same bytes uploaded again are
    -- refused as this file is, without another render.
    content TEXT NOT NULL,
    cause TEXT NOT NULL,
    count INTEGER NOT NULL,
    first_at TEXT NOT NULL,
    last_at TEXT NOT NULL,
    PRIMARY KEY (file_id, variant)
);
CREATE INDEX render_failures_last ON render_failures (last_at);
CREATE INDEX render_failures_content ON render_failures (content, variant);
