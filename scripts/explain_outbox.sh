#!/usr/bin/env bash
# The outbox's reads on PostgreSQL with a million events (issue 26, item 6): EXPLAIN (ANALYZE)
# of the oldest-undelivered gauge and of a claim's pre-read during a receiver outage, before
# migration 0014 (the old gauge query, no `event_deliveries_due` index) and after (the gauge's
# two index-served reads, the index). Figures go to BENCHMARKS.md.
#
# Usage: scripts/explain_outbox.sh [postgres-url]   (default: $UPCOMMIT_TEST_PG_URL)
# Works in a schema of its own, dropped at the end; touches nothing else.
set -euo pipefail
url="${1:-${UPCOMMIT_TEST_PG_URL:-postgres://postgres@127.0.0.1:55400/postgres}}"
root="$(cd "$(dirname "$0")/.." && pwd)"
schema="explain_outbox_$$"
psql_() { PGOPTIONS="-c search_path=$schema" psql "$url" -X -q -v ON_ERROR_STOP=1 "$@"; }
trap 'psql "$url" -X -q -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null' EXIT
psql "$url" -X -q -c "CREATE SCHEMA $schema"
for m in "$root"/migrations/postgres/00{01..12}_*.sql; do psql_ -f "$m"; done

# A million events over 30 days, all delivered to `app` but the last 10 000: those wait for
# their next attempt, an hour away (the receiver is down), one file each.
psql_ <<'SQL'
INSERT INTO event_endpoints (id, kind, url, secret, event_types, source, created_at)
VALUES ('app', 'webhook', 'http://127.0.0.1:9/h', NULL, '*', 'api', now() - interval '31 days');
INSERT INTO events (id, type, subject, occurred_at, payload, position)
SELECT 'evt_' || i, 'file.committed', 'fil_' || i,
       now() - interval '30 days' + i * interval '2.592 seconds', '{}', i
FROM generate_series(1, 1000000) AS i;
INSERT INTO event_deliveries (endpoint_id, position, event_id, subject, state, attempts,
    next_attempt_at, deadline_at, created_at, delivered_at)
SELECT 'app', position, id, subject,
       CASE WHEN position <= 990000 THEN 'delivered' ELSE 'pending' END,
       1, CASE WHEN position <= 990000 THEN occurred_at ELSE now() + interval '1 hour' END,
       occurred_at + interval '1 day', occurred_at,
       CASE WHEN position <= 990000 THEN occurred_at END
FROM events;
ANALYZE;
SQL

gauge_before="SELECT MIN(e.occurred_at) FROM events e WHERE e.position IS NULL
 OR e.position IN (SELECT d.position FROM event_deliveries d
 JOIN event_endpoints ep ON ep.id = d.endpoint_id AND ep.disabled_at IS NULL
 WHERE d.state <> 'delivered')"
gauge_after_1="SELECT MIN(occurred_at) FROM events WHERE position IS NULL"
gauge_after_2="SELECT e.occurred_at FROM events e WHERE e.position = (SELECT MIN(d.position)
 FROM event_deliveries d JOIN event_endpoints ep ON ep.id = d.endpoint_id
 AND ep.disabled_at IS NULL WHERE d.state <> 'delivered')"
# catalog::delivery_queries::DUE as the claim's pre-read runs it, `{now}` before: the volatile
# clock_timestamp(), which no index condition can use; after: (SELECT clock_timestamp()), read
# once per statement, which the due index can.
claim() {
  echo "SELECT d.position FROM event_deliveries d WHERE d.endpoint_id = 'app'
 AND d.state <> 'delivered' AND d.state = 'pending' AND d.next_attempt_at <= $1
 AND (d.lease_until IS NULL OR d.lease_until <= $1)
 AND NOT EXISTS (SELECT 1 FROM event_deliveries e WHERE e.endpoint_id = d.endpoint_id
 AND e.subject = d.subject AND e.position < d.position AND e.state <> 'delivered') LIMIT 1"
}
explain() { echo "== $1"; psql_ -c "EXPLAIN (ANALYZE, BUFFERS) $2"; }

echo "######## before (migrations 0001-0012)"
explain "gauge: oldest undelivered (one query)" "$gauge_before"
explain "claim pre-read, 10 000 pending not due" "$(claim "clock_timestamp()")"
psql_ -f "$root/migrations/postgres/0014_event_retention.sql"
psql_ -c "ANALYZE"
echo "######## after (0014)"
explain "gauge: oldest unsequenced" "$gauge_after_1"
explain "gauge: oldest undelivered to an enabled endpoint" "$gauge_after_2"
explain "claim pre-read, 10 000 pending not due" "$(claim "(SELECT clock_timestamp())")"
