#!/usr/bin/env bash
# A flood of readiness probes against one server: wrk on GET /readyz for BENCH_SECONDS (default
# 5) at 32 connections, and the server's own S3 and database call counters (its /metrics) read
# before and after. With readiness served from a result at most 1 s old, HeadBucket and ping
# grow by about the run's seconds, not by the request count. BENCH_BIN names a built binary
# (default: a release build). LocalStack on 127.0.0.1:4566.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BENCH_BIN:-target/release/upcommit}
[ -n "${BENCH_BIN:-}" ] || cargo build --release --locked --bin upcommit
dir=$(mktemp -d)
export UPCOMMIT_JWT_SECRET=bench-secret-0123456789abcdef UPCOMMIT_LISTEN=127.0.0.1:18283
export DATABASE_URL="${BENCH_DATABASE_URL:-sqlite://$dir/bench.db}" UPCOMMIT_BUCKET=upcommit-bench-readyz
export UPCOMMIT_S3_ENDPOINT=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
export UPCOMMIT_ACCEPT_STORE_GAPS=${UPCOMMIT_ACCEPT_STORE_GAPS:-post_signature} # LocalStack does not check POST policy signatures (docs/stores.md)
export UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS=0 UPCOMMIT_SWEEP_INTERVAL_SECS=0 UPCOMMIT_HYGIENE_INTERVAL_SECS=0
export RUST_LOG=warn
curl -fs -X PUT "$UPCOMMIT_S3_ENDPOINT/$UPCOMMIT_BUCKET" >/dev/null || true
"$bin" serve 2>/dev/null & pid=$!
trap 'kill $pid; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -fs "http://$UPCOMMIT_LISTEN/healthz" >/dev/null && break; sleep 0.1; done
count() { # the sum of a counter's series with operation=$2
  curl -fs "http://$UPCOMMIT_LISTEN/metrics" |
    awk -v m="$1{" -v op="operation=\"$2\"" 'index($0, m) == 1 && index($0, op) { s += $NF } END { print s + 0 }'
}
hb0=$(count upcommit_s3_request_duration_seconds_count HeadBucket)
db0=$(count upcommit_db_query_duration_seconds_count ping)
wrk -t2 -c32 -d"${BENCH_SECONDS:-5}s" --latency "http://$UPCOMMIT_LISTEN/readyz"
hb1=$(count upcommit_s3_request_duration_seconds_count HeadBucket)
db1=$(count upcommit_db_query_duration_seconds_count ping)
echo "HeadBucket calls: $hb0 -> $hb1 (+$((hb1 - hb0))); database pings: $db0 -> $db1 (+$((db1 - db0)))"
