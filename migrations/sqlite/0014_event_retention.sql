-- Event retention and the outbox's reads (issue 26; PostgreSQL twin:
-- migrations/postgres/0014_event_retention.sql).
--
-- discarded_deliveries: how many of the endpoint's deliveries the prune discarded undelivered
-- (the endpoint disabled for longer than the retention, or the delivery's retry window closed
-- longer than the retention ago; docs/events.md), shown by /metrics.
ALTER TABLE event_endpoints ADD COLUMN discarded_deliveries INTEGER NOT NULL DEFAULT 0;

-- The claims' due rows: pending deliveries by when they are due, so a pass during a receiver's
-- outage reads the rows due now instead of walking the endpoint's whole backlog of rows waiting
-- for their next attempt.
CREATE INDEX event_deliveries_due ON event_deliveries (endpoint_id, next_attempt_at)
    WHERE state = 'pending';

