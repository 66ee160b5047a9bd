-- SQLite twin of migrations/postgres/0016_link_scan_retention.sql: link scans gain the state
-- `expired` (an open scan the prune let go: no batch, no completion, never judged by hygiene,
-- its rows deleted in batches). SQLite cannot change a CHECK in place: the table is rebuilt as
-- in 0010, its foreign-key checks deferred to the commit (link_scan_batches and link_scan_seen
-- point at it).
PRAGMA defer_foreign_keys = ON;
CREATE TABLE link_scans_old AS SELECT * FROM link_scans;
DROP TABLE link_scans;
CREATE TABLE link_scans (
    id           TEXT PRIMARY KEY,
    state        TEXT NOT NULL CHECK (state IN ('open', 'completed', 'expired')),
    started_at   TEXT NOT NULL,
    completed_at TEXT
);
INSERT INTO link_scans (id, state, started_at, completed_at)
    SELECT id, state, started_at, completed_at FROM link_scans_old;
DROP TABLE link_scans_old;
-- The latest completed scan (hygiene's every statement) and the prune's selections.
CREATE INDEX link_scans_state ON link_scans (state, completed_at);
