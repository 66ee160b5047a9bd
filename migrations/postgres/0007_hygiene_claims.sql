-- Hygiene acts on a handle only under a claim (SQLite twin: migrations/sqlite/0007_hygiene_claims.sql).
-- `claim` is the intent ('archive', 'delete' or 'restore'), held by `claim_token` until
-- `claim_until` (judged by the database's clock); while it holds, no other transition applies.
-- `link_count` mirrors file_links on the handle row itself, so that a link and a hygiene
-- transition racing on one handle meet on the same row lock.
ALTER TABLE file_handles ADD COLUMN claim TEXT CHECK (claim IN ('archive', 'delete', 'restore'));
ALTER TABLE file_handles ADD COLUMN claim_token TEXT;
ALTER TABLE file_handles ADD COLUMN claim_until TIMESTAMPTZ;
ALTER TABLE file_handles ADD COLUMN link_count BIGINT NOT NULL DEFAULT 0;
UPDATE file_handles SET link_count = (SELECT COUNT(*) FROM file_links l WHERE l.file_id = file_handles.id);
