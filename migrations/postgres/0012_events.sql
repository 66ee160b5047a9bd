-- Events: the transactional outbox and its deliveries (SQLite twin:
-- migrations/sqlite/0012_events.sql).
--
-- events: one row per state change, inserted by the transaction that makes the change (so a
-- change without its event, or an event without its change, cannot commit). `seq` is the order
-- of insertion; `position` is the feed's order, assigned by the sequencer only to events whose
-- transaction has committed, in the order they became visible — a cursor past position N
-- never skips an event that commits later (on PostgreSQL a lower `seq` can commit after a higher
-- one; its position is then higher).
CREATE TABLE events (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    subject TEXT NOT NULL,
    occurred_at TIMESTAMPTZ NOT NULL,
    payload TEXT NOT NULL,
    position BIGINT UNIQUE
);
CREATE INDEX events_unsequenced ON events (seq) WHERE position IS NULL;

-- Where events go: webhooks (Standard Webhooks, `secret` = whsec_…) and queues (`kind` = 'sqs',
-- `url` = the queue URL). `event_types`: '*' or ',type,type,'. `source`: 'settings' (written
-- from the settings file at start) or 'api'.
CREATE TABLE event_endpoints (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('webhook', 'sqs')),
    url TEXT NOT NULL,
    secret TEXT,
    event_types TEXT NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('settings', 'api')),
    created_at TIMESTAMPTZ NOT NULL,
    disabled_at TIMESTAMPTZ
);

-- One row per (endpoint, event) the sequencer fanned out: pending → delivered, or failed once
-- its deadline passed (kept; `upcommit events retry` sends them again). A delivery is sent only
-- when no earlier delivery of the same subject to the same endpoint is pending or failed.
CREATE TABLE event_deliveries (
    endpoint_id TEXT NOT NULL REFERENCES event_endpoints (id),
    position BIGINT NOT NULL,
    event_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    deadline_at TIMESTAMPTZ NOT NULL,
    lease_token TEXT,
    lease_until TIMESTAMPTZ,
    last_status INTEGER,
    last_error TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    delivered_at TIMESTAMPTZ,
    PRIMARY KEY (endpoint_id, position)
);
CREATE INDEX event_deliveries_open ON event_deliveries (endpoint_id, position)
    WHERE state <> 'delivered';
CREATE INDEX event_deliveries_subject ON event_deliveries (endpoint_id, subject, position)
    WHERE state <> 'delivered';
