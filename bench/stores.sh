#!/usr/bin/env bash
# The store-facing suite on LocalStack and on Garage, twice, with each store's request count from
# its own log. GARAGE_ENV / LOCALSTACK_ENV: files exporting each store's test environment (as
# scripts/test.sh exports them); GARAGE_LOG: the running Garage node's log.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
GLOG=${GARAGE_LOG:?garage.log of the running node}
LLOG=~/.cache/upcommit/logs/localstack.log
for round in 1 2; do
for store in localstack garage; do
  if [ $store = garage ]; then source ${GARAGE_ENV:?a file exporting the Garage test environment}; else source ${LOCALSTACK_ENV:?a file exporting the LocalStack test environment}; unset UPCOMMIT_TEST_STORE; export UPCOMMIT_TEST_ACCEPT_STORE_GAPS=post_signature; fi
  l0=$(grep -c "AWS s3\." $LLOG); g0=$(grep -v "error " $GLOG | grep -c "(key GK")
  t0=$(date +%s.%N)
  UPCOMMIT_TEST_DATABASE=sqlite cargo test --locked --test api -- "${GARAGE_SKIPS[@]}" > /tmp/bench_$store.log 2>&1
  t1=$(date +%s.%N)
  l1=$(grep -c "AWS s3\." $LLOG); g1=$(grep -v "error " $GLOG | grep -c "(key GK")
  echo "round $round $store: $(grep 'test result' /tmp/bench_$store.log) wall $(echo "$t1 - $t0" | bc) s; localstack requests $((l1-l0)), garage requests $((g1-g0))"
done
done
