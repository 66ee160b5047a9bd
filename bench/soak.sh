#!/usr/bin/env bash
# Soak: a bounded mixed load (presign → upload → commit, 10% abandoned, 5% retried) against a
# release build on SQLite and LocalStack, then reconcile. Pass: no 5xx, resident memory flat
# after warm-up, reconcile finds no unindexed and no missing object. SOAK_DB=postgres runs it on a
# throwaway PostgreSQL cluster instead of SQLite; every SOAK_WINDOW seconds (300) it records the
# client's p50/p99 of presign and commit, the RSS and the catalog's rows and table/index bytes.
# Usage: [SOAK_DB=sqlite|postgres] bench/soak.sh [SECONDS=180] [WORKERS=8]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
SECONDS_RUN="${1:-180}"
WORKERS="${2:-8}"
SOAK_DB="${SOAK_DB:-sqlite}"
bin="${CARGO_TARGET_DIR:-target}/release/upcommit"
trap 'stop_localstack; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; stop_postgres; rm -rf "${dir:-}"' EXIT
start_localstack
cargo build --release --locked --bin upcommit
dir=$(mktemp -d)
export UPCOMMIT_JWT_SECRET=soak-secret-0123456789abcdef UPCOMMIT_LISTEN=127.0.0.1:18383
export UPCOMMIT_BUCKET="soak-$(date +%s)"
if [ "$SOAK_DB" = postgres ]; then
  start_postgres
  DATABASE_URL="${PG_URL%/postgres}/soak"
  "$PG_BIN/psql" "$PG_URL" -qc "CREATE DATABASE soak" >/dev/null
  export SOAK_STATS_CMD="$LOCALSTACK_VENV/bin/python bench/soak_stats.py postgres $PG_BIN/psql $DATABASE_URL"
else
  DATABASE_URL="sqlite://$dir/soak.db"
  export SOAK_STATS_CMD="$LOCALSTACK_VENV/bin/python bench/soak_stats.py sqlite $dir/soak.db"
fi
export DATABASE_URL
export UPCOMMIT_S3_ENDPOINT="http://$LOCALSTACK_ADDR" UPCOMMIT_CORS_ORIGINS=http://localhost
export UPCOMMIT_ACCEPT_STORE_GAPS=${UPCOMMIT_ACCEPT_STORE_GAPS:-post_signature} # LocalStack does not check POST policy signatures (docs/stores.md)
export UPCOMMIT_QUOTA_DAILY_UPLOADS=0 UPCOMMIT_QUOTA_DAILY_BYTES=0 UPCOMMIT_PRESIGN_RATE_PER_SEC=0
export RUST_LOG=warn
"$LOCALSTACK_VENV/bin/python" scripts/dev_bucket.py "$UPCOMMIT_S3_ENDPOINT" "$UPCOMMIT_BUCKET" "$UPCOMMIT_CORS_ORIGINS" >/dev/null
"$bin" bucket apply-lifecycle --yes >/dev/null
"$bin" serve & pid=$!
for _ in $(seq 50); do curl -fs "http://$UPCOMMIT_LISTEN/healthz" >/dev/null && break; sleep 0.1; done
token=$("$bin" token --sub soak --ttl 2h)
"$LOCALSTACK_VENV/bin/python" bench/soak.py "http://$UPCOMMIT_LISTEN" "$token" "$pid" "$SECONDS_RUN" "$WORKERS"
"$bin" reconcile --grace 0 --json | "$LOCALSTACK_VENV/bin/python" -c '
import json, sys
r = json.load(sys.stdin)["summary"]
print(json.dumps({"reconcile": {k: r[k] for k in ("keys_listed", "handles_read", "matched", "unindexed", "missing")}}))
sys.exit(1 if r["unindexed"] or r["missing"] else 0)'
