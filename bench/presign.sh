#!/usr/bin/env bash
# Presign throughput and latency at 64 connections, beside /healthz on the same server in the
# same run, with wrk on the same 2-core machine (release build, SQLite in a temp dir; presign
# signs locally and writes the catalog, it makes no S3 call). Prints wrk's summaries.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
# BENCH_BIN: a release binary built elsewhere (alternating two builds); otherwise this tree's.
if [ -n "${BENCH_BIN:-}" ]; then
  bin=$BENCH_BIN
else
  cargo build --release --locked --bin upcommit
  bin=${CARGO_TARGET_DIR:-target}/release/upcommit
fi
dir=$(mktemp -d)
export UPCOMMIT_JWT_SECRET=bench-secret-0123456789abcdef UPCOMMIT_LISTEN=127.0.0.1:18282
export DATABASE_URL="${BENCH_DATABASE_URL:-sqlite://$dir/bench.db}" UPCOMMIT_BUCKET=upcommit-bench
export UPCOMMIT_S3_ENDPOINT=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
export UPCOMMIT_ACCEPT_STORE_GAPS=${UPCOMMIT_ACCEPT_STORE_GAPS:-post_signature} # LocalStack does not check POST policy signatures (docs/stores.md)
export UPCOMMIT_QUOTA_DAILY_UPLOADS=0 UPCOMMIT_QUOTA_DAILY_BYTES=0 UPCOMMIT_PRESIGN_RATE_PER_SEC=0
export UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS=0 UPCOMMIT_SWEEP_INTERVAL_SECS=0 UPCOMMIT_HYGIENE_INTERVAL_SECS=0
export RUST_LOG=warn
# The server probes the store at start: the bucket must exist (LocalStack at 127.0.0.1:4566).
source scripts/lib.sh
"$LOCALSTACK_VENV/bin/python" scripts/dev_bucket.py "$UPCOMMIT_S3_ENDPOINT" "$UPCOMMIT_BUCKET" http://localhost >/dev/null
log_file=${BENCH_SERVER_LOG:-/dev/null}
# BENCH_CREDENTIALS=process: the keys come from a credential_process in a profile (as with
# an SSO or vault helper) instead of the environment: what the chain costs when nothing caches.
if [ "${BENCH_CREDENTIALS:-env}" = process ]; then
  printf '#!/bin/sh\necho x >>"%s/calls"\necho '"'"'{"Version": 1, "AccessKeyId": "test", "SecretAccessKey": "test"}'"'"'\n' "$dir" >"$dir/creds.sh"
  chmod +x "$dir/creds.sh"
  printf '[default]\ncredential_process = %s\n' "$dir/creds.sh" >"$dir/aws-config"
  export AWS_CONFIG_FILE="$dir/aws-config" AWS_SHARED_CREDENTIALS_FILE=/dev/null
  unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
fi
"$bin" serve 2>"$log_file" & pid=$!
trap 'kill $pid; rm -rf "$dir"' EXIT
for _ in $(seq 50); do curl -fs "http://$UPCOMMIT_LISTEN/healthz" >/dev/null && break; sleep 0.1; done
UPCOMMIT_BENCH_TOKEN=$("$bin" token --sub bench --ttl 1h)
export UPCOMMIT_BENCH_TOKEN
echo "== GET /healthz"
wrk -t2 -c64 -d10s --latency "http://$UPCOMMIT_LISTEN/healthz"
echo "== POST /v1/uploads"
wrk -t2 -c64 -d10s --latency -s bench/presign.lua "http://$UPCOMMIT_LISTEN/v1/uploads"
if [ "${BENCH_CREDENTIALS:-env}" = process ]; then
  echo "== the credential_process ran $(wc -l <"$dir/calls") times (the server and the token command)"
fi
