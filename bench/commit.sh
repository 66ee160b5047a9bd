#!/usr/bin/env bash
# Commit latency against the raw SDK sequence of the same S3 calls, same LocalStack, same run.
# Usage: bench/commit.sh [N=100]; BENCH_DB=postgres for the catalog on PostgreSQL (SQLite otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
trap 'stop_localstack; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; [ "${BENCH_DB:-sqlite}" = postgres ] && stop_postgres; rm -rf "${dir:-}"' EXIT
start_localstack
cargo build --release --locked --bin upcommit --example commit_raw
target=${CARGO_TARGET_DIR:-target}
dir=$(mktemp -d)
export UPCOMMIT_JWT_SECRET=bench-secret-0123456789abcdef UPCOMMIT_LISTEN=127.0.0.1:18484
export DATABASE_URL="sqlite://$dir/c.db" UPCOMMIT_BUCKET="bench-commit-$(date +%s)"
if [ "${BENCH_DB:-sqlite}" = postgres ]; then
  start_postgres
  "$PG_BIN/psql" "$PG_URL" -qc "CREATE DATABASE bench_commit" >/dev/null
  export DATABASE_URL="${PG_URL%/*}/bench_commit"
fi
export UPCOMMIT_S3_ENDPOINT="http://$LOCALSTACK_ADDR" UPCOMMIT_CORS_ORIGINS=http://localhost
export UPCOMMIT_ACCEPT_STORE_GAPS=${UPCOMMIT_ACCEPT_STORE_GAPS:-post_signature} # LocalStack does not check POST policy signatures (docs/stores.md)
export UPCOMMIT_QUOTA_DAILY_UPLOADS=0 UPCOMMIT_QUOTA_DAILY_BYTES=0 UPCOMMIT_PRESIGN_RATE_PER_SEC=0 RUST_LOG=warn
"$LOCALSTACK_VENV/bin/python" scripts/dev_bucket.py "$UPCOMMIT_S3_ENDPOINT" "$UPCOMMIT_BUCKET" "$UPCOMMIT_CORS_ORIGINS" >/dev/null
"$target"/release/upcommit serve & pid=$!
for _ in $(seq 50); do curl -fs "http://$UPCOMMIT_LISTEN/healthz" >/dev/null && break; sleep 0.1; done
token=$("$target"/release/upcommit token --sub bench --ttl 1h)
"$LOCALSTACK_VENV/bin/python" bench/commit_vs_sdk.py "http://$UPCOMMIT_LISTEN" "$token" "$UPCOMMIT_BUCKET" "${1:-100}"
"$target"/release/examples/commit_raw "$UPCOMMIT_BUCKET" "${1:-100}" "http://$UPCOMMIT_LISTEN" "$token"
# Where a commit's time goes, from the server's own /metrics: the mean commit as the server saw
# it, and the mean time of the S3 and database calls made during the run (per commit).
curl -fsS "http://$UPCOMMIT_LISTEN/metrics" | "$LOCALSTACK_VENV/bin/python" bench/commit_metrics.py
