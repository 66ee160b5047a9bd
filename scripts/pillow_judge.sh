#!/usr/bin/env bash
# Pillow as the outside judge of the images upcommit reads and renders (issue 37): starts the
# real server (SQLite in a temp dir, or PostgreSQL with PILLOW_JUDGE_PG_URL; a fresh LocalStack
# bucket) with profiles whose variants cover every fit and output, and runs
# tests/judge/pillow_judge.py against it: fixtures Pillow writes (EXIF orientations 1–8 with GPS,
# XMP and ICC; CMYK; 16-bit; palette with alpha; animated GIF and WebP; HEIC and AVIF through
# pillow-heif and Pillow's AVIF plugin), renditions read back by Pillow. Called by
# scripts/test.sh after LocalStack is up; standalone: LOCALSTACK_ADDR must answer.
# PILLOW_JUDGE_BIN: a server binary to use instead of building the debug one.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

PILLOW_VERSION=13.0.0
PILLOW_HEIF_VERSION=1.1.1
venv="$UPCOMMIT_CACHE/pillow-judge-venv"
if ! "$venv/bin/python" -c "import PIL, pillow_heif; assert PIL.__version__ == '$PILLOW_VERSION' and pillow_heif.__version__ == '$PILLOW_HEIF_VERSION'" 2>/dev/null; then
  log "installing Pillow $PILLOW_VERSION and pillow-heif $PILLOW_HEIF_VERSION into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "Pillow==$PILLOW_VERSION" "pillow-heif==$PILLOW_HEIF_VERSION"
fi

work=$(mktemp -d)
server_pid=""
cleanup_judge() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup_judge EXIT

cat >"$work/upcommit.toml" <<'TOML'
[[profiles]]
name = "image"
content_types = ["image/jpeg", "image/png", "image/gif", "image/webp", "image/heic", "image/avif"]
max_size = 20000000
final_prefix = "media/images/"

[[profiles.variants]]
name = "cover"
width = 60
height = 60
fit = "cover"

[[profiles.variants]]
name = "contain"
width = 100
height = 100
fit = "contain"

[[profiles.variants]]
name = "inside"
width = 60
height = 60
fit = "inside"

[[profiles.variants]]
name = "card"
width = 60
height = 60
fit = "inside"
format = "webp"

[[profiles.variants]]
name = "small"
width = 60
height = 60
fit = "inside"
format = "avif"

[[profiles]]
name = "tiny"
content_types = ["image/png"]
max_size = 1000000
final_prefix = "tiny/"
max_pixels = 1000

[[profiles]]
name = "sized"
content_types = ["image/png"]
max_size = 1000000
final_prefix = "sized/"
min_width = 200
TOML

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export UPCOMMIT_LISTEN="127.0.0.1:$port"
export UPCOMMIT_BUCKET="pillow-judge-$(date +%s)-$$"
export UPCOMMIT_S3_ENDPOINT="http://$LOCALSTACK_ADDR"
export UPCOMMIT_CONFIG="$work/upcommit.toml"
export DATABASE_URL="${PILLOW_JUDGE_PG_URL:-sqlite://$work/upcommit.db}"
export UPCOMMIT_JWT_SECRET="pillow-judge-secret-0123456789abcdef"
export UPCOMMIT_CORS_ORIGINS="http://$UPCOMMIT_LISTEN"
export UPCOMMIT_ACCEPT_STORE_GAPS="$LOCALSTACK_GAPS"
export UPCOMMIT_PRESIGN_RATE_PER_SEC=0 UPCOMMIT_QUOTA_DAILY_UPLOADS=0 UPCOMMIT_QUOTA_DAILY_BYTES=0
export RUST_LOG="${RUST_LOG:-warn}"

if [ -n "${PILLOW_JUDGE_BIN:-}" ]; then
  bin=$PILLOW_JUDGE_BIN
else
  cargo build --locked --tests
  bin="${CARGO_TARGET_DIR:-target}/debug/upcommit"
fi
serve_for_script "$bin" "$work"
server_pid=$SERVED_PID
token=$("$bin" token --sub pillow-judge --ttl 1h)

log "Pillow $PILLOW_VERSION judges the images of http://$UPCOMMIT_LISTEN ($([ -n "${PILLOW_JUDGE_PG_URL:-}" ] && echo PostgreSQL || echo SQLite))"
status=0
"$venv/bin/python" tests/judge/pillow_judge.py "http://$UPCOMMIT_LISTEN" "$token" || status=$?
if [ "$status" -ne 0 ]; then
  log "the server's log:"
  tail -n 40 "$work/server.log" >&2
fi
exit "$status"
