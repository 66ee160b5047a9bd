-- End-to-end checksums (both backends run the same text).
-- uploads: the checksum the client declared at presign (algorithm and base64 value), bound into
-- the URL, the form or the multipart upload so S3 refuses other bytes; NULL when none was
-- declared (and on rows written before this migration).
-- file_handles: the checksum of the committed object as S3 reported it at the copy — equal to
-- the declared one when there was one (commit refuses a mismatch); NULL on older rows.
ALTER TABLE uploads ADD COLUMN checksum_algorithm TEXT;
ALTER TABLE uploads ADD COLUMN checksum_value TEXT;
ALTER TABLE file_handles ADD COLUMN checksum_algorithm TEXT;
ALTER TABLE file_handles ADD COLUMN checksum_value TEXT;
