#!/usr/bin/env bash
# Two (or more) server builds alternated on the commit benchmark, so the machine's drift hits them
# alike: each round starts a fresh LocalStack, bucket and catalog per build, runs `commit_raw`
# against it, and prints the six-call reference, the bare two calls and the commit (client and
# server side) p50s, the server's mean per S3 and catalog call (its /metrics), and the server's
# CPU time and context switches over the run (/proc).
# Usage: bench/commit_ab.sh ROUNDS N DIR... — each DIR holds an `upcommit` and a `commit_raw`
# binary (copy them from target/release and target/release/examples after building each commit;
# `git worktree` for an old one). A DIR may carry server environment: `DIR:TOKIO_WORKER_THREADS=1`.
# BENCH_DB=postgres puts the catalogs on PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
rounds=$1 n=$2
shift 2
one() { # DIR ENV
  local bin=$1/upcommit raw=$1/commit_raw dir pid token
  dir=$(mktemp -d)
  export UPCOMMIT_JWT_SECRET=bench-secret-0123456789abcdef UPCOMMIT_LISTEN=127.0.0.1:18484
  export DATABASE_URL="sqlite://$dir/c.db" UPCOMMIT_BUCKET="bench-ab-$(date +%s%N)"
  if [ "${BENCH_DB:-sqlite}" = postgres ]; then
    db="bench_ab_$(date +%s%N)"
    "$PG_BIN/psql" "$PG_URL" -qc "CREATE DATABASE $db" >/dev/null
    export DATABASE_URL="${PG_URL%/*}/$db"
  fi
  export UPCOMMIT_S3_ENDPOINT="http://$LOCALSTACK_ADDR" UPCOMMIT_CORS_ORIGINS=http://localhost
  export UPCOMMIT_ACCEPT_STORE_GAPS=${UPCOMMIT_ACCEPT_STORE_GAPS:-post_signature} # LocalStack does not check POST policy signatures (docs/stores.md)
  export UPCOMMIT_QUOTA_DAILY_UPLOADS=0 UPCOMMIT_QUOTA_DAILY_BYTES=0 UPCOMMIT_PRESIGN_RATE_PER_SEC=0 RUST_LOG=error
  "$LOCALSTACK_VENV/bin/python" scripts/dev_bucket.py "$UPCOMMIT_S3_ENDPOINT" "$UPCOMMIT_BUCKET" "$UPCOMMIT_CORS_ORIGINS" >/dev/null
  env $2 "$bin" serve 2>/dev/null & pid=$!
  for _ in $(seq 50); do curl -fs "http://$UPCOMMIT_LISTEN/healthz" >/dev/null && break; sleep 0.1; done
  token=$("$bin" token --sub bench --ttl 1h)
  cpu() { awk '{s+=$14+$15} END {print s}' /proc/$pid/task/*/stat; }
  csw() { cat /proc/$pid/task/*/status | awk '/voluntary_ctxt/ {s+=$2} END {print s}'; }
  local c0 w0
  c0=$(cpu) w0=$(csw)
  "$raw" "$UPCOMMIT_BUCKET" "$n" "http://$UPCOMMIT_LISTEN" "$token" | python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        d = json.loads(line)
        print("  p50 ms: six-call", d["raw_six_calls_ms"]["p50"], "| two calls", d["raw_two_calls_ms"]["p50"],
              "| commit client", d["commit_client_ms"]["p50"], "server", d["commit_server_ms"]["p50"],
              "| ratio client", d["ratio_p50_client"], "server", d["ratio_p50_server"],
              "| commit p99 client", d["commit_client_ms"]["p99"], "server", d["commit_server_ms"]["p99"])
    else:
        print("  bare " + line.strip())'
  echo "  server: $(( $(cpu) - c0 )) CPU ticks, $(( $(csw) - w0 )) context switches"
  curl -fsS "http://$UPCOMMIT_LISTEN/metrics" | python3 -c '
import re, sys
sums, counts, le = {}, {}, {}
for line in sys.stdin:
    m = re.match(r"upcommit_(?:s3_request|db_query)_duration_seconds_(sum|count)\{.*operation=\"([^\"]+)\".*\} (\S+)", line)
    if m:
        d = sums if m[1] == "sum" else counts
        d[m[2]] = d.get(m[2], 0) + float(m[3])
    b = re.match(r"upcommit_db_query_duration_seconds_bucket\{.*operation=\"([^\"]+)\".*le=\"0.0025\".*\} (\S+)", line)
    if b:
        le[b[1]] = le.get(b[1], 0) + float(b[2])
ops = ("GetObject", "CopyObject", "upload_by_key", "take_lease", "record_handle")
print("  server means ms:", " ".join(f"{k} {sums[k] / counts[k] * 1000:.2f}" for k in ops if counts.get(k)))
print("  calls over 2.5 ms:", " ".join(f"{k} {int(counts.get(k, 0) - le[k])}" for k in ("upload_by_key", "take_lease", "record_handle") if k in le))'
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap 'stop_localstack; [ "${BENCH_DB:-sqlite}" = postgres ] && stop_postgres' EXIT
start_localstack
[ "${BENCH_DB:-sqlite}" = postgres ] && start_postgres
for r in $(seq "$rounds"); do
  for spec in "$@"; do
    d=${spec%%:*} e=""
    [ "$spec" != "$d" ] && e=${spec#*:}
    echo "== $spec round $r $(date -u +%H:%M:%S)"
    one "$d" "$e"
  done
done
