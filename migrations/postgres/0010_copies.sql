-- Shared handles (SQLite twin: migrations/sqlite/0010_copies.sql): a copy is a second handle
-- of an existing object (`POST /v1/files/{id}/copies`), with its own owner, links and status.
-- It keeps the upload id of the handle it was copied from (the upload that put the bytes in
-- the bucket) and names that handle in `copied_from`; only the handle a commit made
-- (`copied_from IS NULL`) is unique per upload, so a commit retry still finds exactly its own.
-- Keys were already shared (0004): several handles may name one key.
ALTER TABLE file_handles ADD COLUMN copied_from TEXT;
ALTER TABLE file_handles DROP CONSTRAINT file_handles_upload_id_key;
CREATE UNIQUE INDEX file_handles_upload ON file_handles (upload_id) WHERE copied_from IS NULL;
