#!/usr/bin/env bash
# Presign and commit latency on an idle server, then with every render slot busy (issue 46,
# item 7): the release build on SQLite and LocalStack, the render workers at their nice value,
# two threads asking for renditions of sharp's benchmark photo (2725 x 2225) into three
# 1600 px WebP variants (every request a cache miss) while N uploads (presign, PUT, commit)
# run one after another. Prints one JSON line per phase and the p99 ratios.
# Usage: bench/uploads_beside_renders.sh [N=200]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
N=${1:-200}
target=${CARGO_TARGET_DIR:-target}
photo=../shared/bench/2569067123_aca715a2ee_o.jpg
[ -f "$photo" ] || { log "needs $photo (shared/bench)"; exit 1; }
ensure_turbojpeg_installed
cargo build --release --locked --bin upcommit
work=$(mktemp -d)
SERVER_PID=""
finish() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  stop_localstack
  rm -rf "$work"
}
trap finish EXIT
start_localstack
export UPCOMMIT_BUCKET="bench-beside-$$" UPCOMMIT_S3_ENDPOINT="http://$LOCALSTACK_ADDR"
export DATABASE_URL="sqlite://$work/upcommit.db?mode=rwc" UPCOMMIT_JWT_SECRET=0123456789abcdef0123
export UPCOMMIT_ACCEPT_STORE_GAPS="$LOCALSTACK_GAPS" UPCOMMIT_PRESIGN_RATE_PER_SEC=0
export UPCOMMIT_CONFIG="$work/upcommit.toml" UPCOMMIT_RENDER_MEMORY_MIB=512 RUST_LOG=error
export UPCOMMIT_QUOTA_DAILY_UPLOADS=0 UPCOMMIT_QUOTA_DAILY_BYTES=0
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export UPCOMMIT_LISTEN="127.0.0.1:$port"
{
  printf '[[profiles]]\nname = "image"\ncontent_types = ["image/jpeg", "image/png"]\nmax_size = 20000000\nfinal_prefix = "media/images/"\n'
  for v in big1 big2 big3; do
    printf '\n[[profiles.variants]]\nname = "%s"\nwidth = 1600\nheight = 1600\nfit = "inside"\nformat = "webp"\n' "$v"
  done
} >"$work/upcommit.toml"
"$LOCALSTACK_VENV/bin/python" scripts/dev_bucket.py "$UPCOMMIT_S3_ENDPOINT" "$UPCOMMIT_BUCKET" "" >/dev/null
"$target/release/upcommit" bucket apply-lifecycle --yes >/dev/null
"$target/release/upcommit" serve &
SERVER_PID=$!
for _ in $(seq 1 100); do curl -fsS "http://$UPCOMMIT_LISTEN/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
token=$("$target/release/upcommit" token --sub bench)
"$LOCALSTACK_VENV/bin/python" bench/uploads_beside_renders.py "http://$UPCOMMIT_LISTEN" "$token" "$photo" "$N"
