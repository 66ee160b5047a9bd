-- Issue 46: renders that ended their worker (a death: a signal, an abort, the memory limit) or
-- ran past the time limit, per (file, variant). A death refuses that variant of that file at
-- once from then on; two time-outs in a row do too. A render that succeeds clears the row; an
-- operator clears it with `DELETE /v1/admin/files/{id}/render-failures`.
CREATE TABLE render_failures (
    file_id TEXT NOT NULL,
    variant TEXT NOT NULL,
    -- The bytes, as the store names them (ETag:size): the same bytes uploaded again are
    -- refused as this file is, without another render.
    content TEXT NOT NULL,
    cause TEXT NOT NULL,
    count BIGINT NOT NULL,
    first_at TIMESTAMPTZ NOT NULL,
    last_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (file_id, variant)
);
CREATE INDEX render_failures_last ON render_failures (last_at);
CREATE INDEX render_failures_content ON render_failures (content, variant);
