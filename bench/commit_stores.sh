#!/usr/bin/env bash
# Presign and commit on each store the test command runs, in one run (issue 36): LocalStack
# 4.14.0 (versioned bucket), Garage 2.5.0 (single node; it keeps no versions) and Ceph RGW
# 16.2.15 (single node, versioned bucket), one after the other on this machine, each store
# started fresh, a release server per store with that store's gaps accepted (as an operator of
# it would) and its background jobs off. Per store: examples/commit_raw (the bare two S3 calls a
# commit makes, and presign + commit through the server, interleaved in one loop) and the
# server's own /metrics (bench/commit_metrics.py: the commit's time above its S3 calls).
# Usage: bench/commit_stores.sh [N=200]. Prints one JSON line per tool per store.
# BENCH_SERVER_BIN=path runs that server binary instead of this tree's (A/B of two builds).
set -euo pipefail
cd "$(dirname "$0")/.."
# Ports of their own: a test run may hold the default ones (set before lib.sh reads them).
export LOCALSTACK_ADDR=${BENCH_LOCALSTACK_ADDR:-127.0.0.1:4620} GARAGE_S3_PORT=3960 CEPH_S3_PORT=7660 CEPH_MON_PORT=3360
source scripts/lib.sh
N=${1:-200}
target=${CARGO_TARGET_DIR:-target}
# BENCH_SERVER_BIN: another build of the server to measure (e.g. the commit before a change).
server=${BENCH_SERVER_BIN:-$target/release/upcommit}
cargo build --release --locked --bin upcommit --example commit_raw
dir=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  stop_localstack; stop_garage; stop_ceph
  rm -rf "$dir"
}
trap cleanup EXIT

# BENCH_STORES: a subset; CEPH_FRONTEND: options for RGW's beast frontend (e.g. tcp_nodelay=1).
for store in ${BENCH_STORES:-localstack garage rgw}; do
  case $store in
    localstack)
      start_localstack
      endpoint="http://$LOCALSTACK_ADDR" key=test secret=test versioned=1 gaps=post_signature ;;
    garage)
      start_garage
      endpoint=$GARAGE_ENDPOINT key=$GARAGE_KEY_ID secret=$GARAGE_SECRET versioned=0 gaps=$GARAGE_GAPS ;;
    rgw)
      start_ceph
      endpoint=$CEPH_ENDPOINTS key=$CEPH_KEY_ID secret=$CEPH_SECRET versioned=1 gaps=$RGW_GAPS_VERSIONED ;;
  esac
  export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret UPCOMMIT_S3_ENDPOINT=$endpoint
  export UPCOMMIT_BUCKET="bench-stores-$store-$(date +%s)" UPCOMMIT_ACCEPT_STORE_GAPS=$gaps
  "$LOCALSTACK_VENV/bin/python" - "$endpoint" "$UPCOMMIT_BUCKET" "$versioned" <<'PY'
import sys, boto3
endpoint, bucket, versioned = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
s3.create_bucket(Bucket=bucket)
if versioned:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
PY
  export UPCOMMIT_JWT_SECRET=bench-secret-0123456789abcdef UPCOMMIT_LISTEN=127.0.0.1:18486
  export DATABASE_URL="sqlite://$dir/$store.db" UPCOMMIT_CORS_ORIGINS=http://localhost
  export UPCOMMIT_QUOTA_DAILY_UPLOADS=0 UPCOMMIT_QUOTA_DAILY_BYTES=0 UPCOMMIT_PRESIGN_RATE_PER_SEC=0
  export UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS=0 UPCOMMIT_SWEEP_INTERVAL_SECS=0 UPCOMMIT_HYGIENE_INTERVAL_SECS=0
  export RUST_LOG=warn
  "$server" serve 2>"$dir/$store-server.log" & pid=$!
  up=""
  for _ in $(seq 100); do curl -fs "http://$UPCOMMIT_LISTEN/healthz" >/dev/null && { up=1; break; }; sleep 0.1; done
  [ -n "$up" ] || { cat "$dir/$store-server.log" >&2; exit 1; }
  token=$("$server" token --sub bench --ttl 1h)
  log "$store: $N presigns and commits, and the bare two calls, interleaved"
  echo "$store commit_raw $("$target"/release/examples/commit_raw "$UPCOMMIT_BUCKET" "$N" "http://$UPCOMMIT_LISTEN" "$token")"
  echo "$store server $(curl -fsS "http://$UPCOMMIT_LISTEN/metrics" | "$LOCALSTACK_VENV/bin/python" bench/commit_metrics.py)"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  case $store in
    localstack) stop_localstack ;;
    garage) stop_garage ;;
    rgw) stop_ceph ;;
  esac
done
