#!/usr/bin/env bash
# The store-facing suite on LocalStack 4.14.0, Garage 2.5.0 and Ceph RGW 16.2.15 (versioned
# bucket), back to back, each store started fresh by this script on ports of its own, with the
# same test set on all three: the whole `--test api` suite less the Garage run's and the RGW
# run's skips (scripts/lib.sh), SQLite, debug build, the default two test threads. Each store's
# request count comes from its own request log: LocalStack's `AWS s3.<Operation>` lines,
# Garage's authenticated request lines, the gateway's `beast:` lines.
# Usage: bench/stores.sh [ROUNDS=1]. Prints one line per store per round.
set -uo pipefail
cd "$(dirname "$0")/.."
export LOCALSTACK_ADDR=127.0.0.1:4630 GARAGE_S3_PORT=3970 CEPH_S3_PORT=7670 CEPH_MON_PORT=3370
source scripts/lib.sh
ROUNDS=${1:-1}
trap 'stop_localstack; stop_garage; stop_ceph' EXIT
cargo build --locked --tests >/dev/null 2>&1
out=$(mktemp -d)
for round in $(seq "$ROUNDS"); do
for store in localstack garage rgw; do
  (
    case $store in
      localstack)
        start_localstack
        count() { grep -c "AWS s3\." "$UPCOMMIT_CACHE/logs/localstack.log"; }
        export UPCOMMIT_TEST_S3_ENDPOINT="http://$LOCALSTACK_ADDR" UPCOMMIT_TEST_ACCEPT_STORE_GAPS=post_signature ;;
      garage)
        start_garage
        count() { grep -v "error " "$GARAGE_DIR/garage.log" | grep -c "(key GK"; }
        export AWS_ACCESS_KEY_ID="$GARAGE_KEY_ID" AWS_SECRET_ACCESS_KEY="$GARAGE_SECRET"
        export UPCOMMIT_TEST_S3_ENDPOINT="$GARAGE_ENDPOINT" UPCOMMIT_TEST_STORE=garage
        export UPCOMMIT_TEST_ACCEPT_STORE_GAPS="$GARAGE_GAPS" ;;
      rgw)
        start_ceph
        count() { cat "$CEPH_DIR"/log/client.rgw.*.log | grep -c "beast:"; }
        export AWS_ACCESS_KEY_ID="$CEPH_KEY_ID" AWS_SECRET_ACCESS_KEY="$CEPH_SECRET"
        export UPCOMMIT_TEST_S3_ENDPOINT="$CEPH_ENDPOINTS" UPCOMMIT_TEST_STORE=rgw
        export UPCOMMIT_TEST_ACCEPT_STORE_GAPS="$RGW_GAPS_VERSIONED" ;;
    esac
    r0=$(count)
    t0=$(date +%s.%N)
    UPCOMMIT_TEST_DATABASE=sqlite cargo test --locked --test api -- "${GARAGE_SKIPS[@]}" "${RGW_SKIPS[@]}" >"$out/$store.log" 2>&1
    t1=$(date +%s.%N)
    r1=$(count)
    echo "round $round $store: $(grep 'test result' "$out/$store.log") wall $(echo "$t1 - $t0" | bc) s; $((r1 - r0)) S3 requests"
    stop_localstack; stop_garage; stop_ceph
  )
done
done
