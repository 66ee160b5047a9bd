-- SQLite twin of migrations/postgres/0013_claim_s3.sql (`claim_s3_at` is stored as RFC 3339
-- text, like `claim_until`).
ALTER TABLE file_handles ADD COLUMN claim_s3_at TEXT;
CREATE INDEX file_handles_claimed ON file_handles (key) WHERE claim IS NOT NULL;
