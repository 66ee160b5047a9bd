-- A hygiene claim's holder records when its last check passed and it began changing S3
-- (SQLite twin: migrations/sqlite/0013_claim_s3.sql). A link scan that saw a handle of a key
-- whose deletion has reached that point is not completed until the deletion settles (its
-- objects are going); before that point the scan completes and the deletion's last check
-- refuses. NULL whenever a new claim is taken.
ALTER TABLE file_handles ADD COLUMN claim_s3_at TIMESTAMPTZ;
-- Claims are few: the scan's completion and the return of vouched handles look them up by key.
CREATE INDEX file_handles_claimed ON file_handles (key) WHERE claim IS NOT NULL;
