-- SQLite twin of migrations/postgres/0007_hygiene_claims.sql. `claim_until` is stored in the
-- database clock's own text form (strftime '%Y-%m-%dT%H:%M:%fZ'), so it compares as text.
ALTER TABLE file_handles ADD COLUMN claim TEXT CHECK (claim IN ('archive', 'delete', 'restore'));
ALTER TABLE file_handles ADD COLUMN claim_token TEXT;
ALTER TABLE file_handles ADD COLUMN claim_until TEXT;
ALTER TABLE file_handles ADD COLUMN link_count BIGINT NOT NULL DEFAULT 0;
UPDATE file_handles SET link_count = (SELECT COUNT(*) FROM file_links l WHERE l.file_id = file_handles.id);
