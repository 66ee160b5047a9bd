-- Link-scan retention (SQLite twin: migrations/sqlite/0016_link_scan_retention.sql): the prune
-- expires an open scan nothing was sent to for longer than UPCOMMIT_JOB_HISTORY_RETENTION
-- (`expired`: no batch, no completion, never judged by hygiene) before it deletes its rows in
-- batches, so a scan half-deleted can never be completed, nor become the scan hygiene judges by.
ALTER TABLE link_scans DROP CONSTRAINT link_scans_state_check;
ALTER TABLE link_scans ADD CONSTRAINT link_scans_state_check
    CHECK (state IN ('open', 'completed', 'expired'));
-- The latest completed scan (hygiene's every statement) and the prune's selections.
CREATE INDEX link_scans_state ON link_scans (state, completed_at);
