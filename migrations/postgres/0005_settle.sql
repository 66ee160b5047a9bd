-- Settling uploads after their URLs expire, and one completion of a multipart upload at a time.
-- Single-use upload URLs: a settled upload's tmp object stays until its URL has expired (so
-- `If-None-Match: *` keeps refusing a second PUT), then every version is deleted in batches.
-- tmp_version_id is the version the commit checked; tmp_cleared_at is set once every version
-- of the tmp key is gone. Uploads settled before this migration had their tmp object deleted
-- by the commit itself.
ALTER TABLE uploads ADD COLUMN tmp_version_id TEXT;
ALTER TABLE uploads ADD COLUMN tmp_cleared_at TIMESTAMPTZ;
UPDATE uploads SET tmp_cleared_at = updated_at WHERE state IN ('committed', 'rejected');
CREATE INDEX uploads_tmp_pending ON uploads (expires_at)
    WHERE tmp_cleared_at IS NULL AND state IN ('committed', 'rejected');

-- One completion of a multipart upload at a time: the call that claims the session is the only
-- one that calls CompleteMultipartUpload; a claim expires (judged on the database's clock) so a
-- caller that died does not block the upload.
ALTER TABLE multipart_sessions ADD COLUMN claim_token TEXT;
ALTER TABLE multipart_sessions ADD COLUMN claim_until TIMESTAMPTZ;
