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
curl -fsS "http://$UPCOMMIT_LISTEN/metrics" | "$LOCALSTACK_VENV/bin/python" -c '
import json, re, sys
sums, counts = {}, {}
for line in sys.stdin:
    m = re.match(r"(upcommit_\w+)_(sum|count)\{(.*)\} (\S+)", line)
    if m:
        (sums if m[2] == "sum" else counts)[(m[1], m[3])] = float(m[4])
def total(metric, pred=lambda labels: True):
    return sum(v for (n, l), v in sums.items() if n == metric and pred(l))
q = chr(34)
commit = [k for k in counts if k[0] == "upcommit_http_request_duration_seconds" and "route=" + q + "/v1/files" + q in k[1] and "status=" + q + "201" + q in k[1]]
n = sum(counts[k] for k in commit)
server = sum(sums[k] for k in commit)
s3 = total("upcommit_s3_request_duration_seconds", lambda l: not re.search("Bucket", l))
db = total("upcommit_db_query_duration_seconds")
def per_op(metric):
    out = {}
    for (name, labels), v in sums.items():
        op = re.search("operation=" + q + "([^" + q + "]+)", labels)
        if name == metric and op and "Bucket" not in op[1]:
            c = counts.get((name, labels), 0)
            out[op[1]] = {"calls": int(c), "mean_ms": round(v / c * 1000, 2) if c else None}
    return out
print(json.dumps({"commits": int(n), "server_ms_per_commit": round(server / n * 1000, 2),
    "s3_ms_per_commit_all_object_calls": round(s3 / n * 1000, 2),
    "db_ms_per_request_all_calls": round(db / n * 1000, 2),
    "s3_by_operation": per_op("upcommit_s3_request_duration_seconds"),
    "db_by_operation": per_op("upcommit_db_query_duration_seconds")}))'

