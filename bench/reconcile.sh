#!/usr/bin/env bash
# Reconcile's merge-join on 1M and 10M synthetic sorted keys per side: keys per second (both
# sides counted) and peak resident memory. Memory must stay flat as keys grow.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --example reconcile_join
for n in 1000000 10000000; do
  target/release/examples/reconcile_join "$n"
done
