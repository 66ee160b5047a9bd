#!/usr/bin/env bash
# The store-facing suite on LocalStack and on Garage, twice, with each store's request count from
# its own log. GARAGE_ENV / LOCALSTACK_ENV: files exporting each store's test environment (as
# scripts/test.sh exports them); GARAGE_LOG: the running Garage node's log.
set -uo pipefail
cd "$(dirname "$0")/.."
SKIPS=(--skip sqs_sink --skip s3_proxy --skip bucket:: --skip hygiene --skip copies --skip model --skip archive_class
  --skip checksums::an_object_arriving_at_the_final_key_during_a_copy_in_parts_is_kept
  --skip reconcile::quarantine_moves_an_object_over_the_single_copy_limit_in_parts
  --skip validation_hook::every_part_copy_is_of_the_version_the_hook_scanned_not_a_twin_posted_meanwhile
  --skip validation_hook::objects_copied_in_parts_are_put_to_the_hook_before_the_copy_too
  --skip sweep::old_abandoned_partitions_go_with_every_version_and_the_rest_stays
  --skip sweep::a_day_of_abandoned_uploads_is_swept_page_by_page_with_batched_catalog_lookups
  --skip validation_hook::a_refusal_rejects_the_upload_for_good_and_nothing_reaches_the_final_key
  --skip validation_hook::bytes_swapped_while_the_hook_scans_are_never_committed
  --skip validation_hook::the_copy_is_of_the_version_the_hook_scanned_not_a_twin_posted_meanwhile)
GLOG=${GARAGE_LOG:?garage.log of the running node}
LLOG=~/.cache/upcommit/logs/localstack.log
for round in 1 2; do
for store in localstack garage; do
  if [ $store = garage ]; then source ${GARAGE_ENV:?a file exporting the Garage test environment}; else source ${LOCALSTACK_ENV:?a file exporting the LocalStack test environment}; unset UPCOMMIT_TEST_STORE; export UPCOMMIT_TEST_ACCEPT_STORE_GAPS=post_signature; fi
  l0=$(grep -c "AWS s3\." $LLOG); g0=$(grep -v "error " $GLOG | grep -c "(key GK")
  t0=$(date +%s.%N)
  UPCOMMIT_TEST_DATABASE=sqlite cargo test --locked --test api -- "${SKIPS[@]}" > /tmp/bench_$store.log 2>&1
  t1=$(date +%s.%N)
  l1=$(grep -c "AWS s3\." $LLOG); g1=$(grep -v "error " $GLOG | grep -c "(key GK")
  echo "round $round $store: $(grep 'test result' /tmp/bench_$store.log) wall $(echo "$t1 - $t0" | bc) s; localstack requests $((l1-l0)), garage requests $((g1-g0))"
done
done
