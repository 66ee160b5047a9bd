#!/usr/bin/env bash
# Reconcile benchmarks.
#
# bench/reconcile.sh            the merge-join alone on 1M and 10M synthetic sorted keys per side:
#                               keys per second (both sides counted) and peak resident memory,
#                               which must stay flat as keys grow.
# bench/reconcile.sh listing N  `upcommit reconcile` over a LocalStack bucket of N objects laid out
#                               as committed files, with one handle each in a SQLite catalog, with
#                               1 and with 8 listing workers: keys per second and peak RSS
#                               (/usr/bin/time -v). Needs LocalStack on 127.0.0.1:4566 (or
#                               BENCH_S3_ENDPOINT) and its venv's python (boto3). The bucket is
#                               deleted afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" != listing ]]; then
  cargo build --release --locked --example reconcile_join
  for n in 1000000 10000000; do
    target/release/examples/reconcile_join "$n"
  done
  exit 0
fi

n="${2:-200000}"
endpoint="${BENCH_S3_ENDPOINT:-http://127.0.0.1:4566}"
python="${BENCH_PYTHON:-$HOME/.cache/upcommit/localstack-4.14.0-venv/bin/python}"
bucket="${BENCH_BUCKET:-upcommit-bench-reconcile-$$}"
dir=$(mktemp -d /tmp/upcommit-bench-reconcile.XXXXXX)
# BENCH_BIN=target/debug/upcommit measures another build (release by default).
bin="${BENCH_BIN:-target/release/upcommit}"
[[ -n "${BENCH_BIN:-}" ]] || cargo build --release --locked --bin upcommit
export UPCOMMIT_ACCEPT_STORE_GAPS=${UPCOMMIT_ACCEPT_STORE_GAPS:-post_signature} # LocalStack does not check POST policy signatures (docs/stores.md)
export DATABASE_URL="sqlite://$dir/catalog.db" UPCOMMIT_BUCKET="$bucket" UPCOMMIT_S3_ENDPOINT="$endpoint" \
  AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" \
  AWS_REGION="${AWS_REGION:-us-east-1}" UPCOMMIT_JWT_SECRET=bench-secret-0123456789 RUST_LOG=warn
cleanup() {
  [[ -n "${BENCH_KEEP:-}" ]] || "$python" bench/reconcile_bucket.py "$endpoint" "$bucket" - 0 delete || true
  rm -rf "$dir"
}
trap cleanup EXIT
"$bin" migrate
"$python" bench/reconcile_bucket.py "$endpoint" "$bucket" "$dir/catalog.db" "$n"
for workers in 1 8; do
  /usr/bin/time -v "$bin" reconcile --grace 0 --json --workers "$workers" \
    >"$dir/out.json" 2>"$dir/time.txt"
  python3 - "$dir/out.json" "$dir/time.txt" "$workers" <<'PY'
import json, re, sys
out = json.load(open(sys.argv[1]))
t = open(sys.argv[2]).read()
wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", t)
secs = (int(wall.group(1) or 0) * 3600) + int(wall.group(2)) * 60 + float(wall.group(3))
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
s = out["summary"]
print(f"workers {sys.argv[3]}: {s['keys_listed']} keys listed, {s['matched']} matched, "
      f"{s.get('list_requests')} ListObjectsV2 calls, {secs:.1f} s, {s['keys_listed'] / secs:,.0f} keys/s, "
      f"peak RSS {rss / 1024:.1f} MiB, state {out['run']['state']}")
PY
done
