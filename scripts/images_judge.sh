#!/usr/bin/env bash
# Pillow as the outside judge of the images upcommit reads and renders (issue 37): starts the
# real server (SQLite in a temp dir, a fresh LocalStack bucket) with the profiles below (their
# variants cover every fit and every output format; two profiles bound images) and runs
# tests/images/judge.py against it: fixtures Pillow writes (EXIF orientations 1-8 with GPS, XMP
# and ICC, progressive, gray, CMYK, 16-bit, palette and gray with alpha, animated GIF and WebP,
# still WebP, HEIC and AVIF), renditions read back by Pillow. With UPCOMMIT_TEST_PG_URL (an
# admin URL, as scripts/test.sh exports it) the judge runs a second time on PostgreSQL, in a
# database of its own, dropped afterwards.
# Standalone: starts LocalStack on LOCALSTACK_ADDR if nothing answers there (and stops it).
# UPCOMMIT_JUDGE_BIN: a server binary to use instead of building the debug one.
# Exits non-zero if any case of either run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

# Pillow 13 reads and writes AVIF itself; pillow-heif adds HEIC (libheif with x265 and libde265
# in its wheel). Pinned: the judge's verdicts must not move with a release.
IMAGES_JUDGE_VENV="$UPCOMMIT_CACHE/images-judge-venv"
PILLOW_VERSION="13.0.0"
PILLOW_HEIF_VERSION="1.1.1"

# The venv is reused while it holds these versions. pillow-heif is wanted, not required: where
# it does not install, the judge prints its HEIC cases as skipped with the reason, and the next
# run tries the install again.
ensure_images_judge_installed() {
  local stamp="$IMAGES_JUDGE_VENV/.installed-pillow-$PILLOW_VERSION-heif-$PILLOW_HEIF_VERSION"
  if [ -x "$IMAGES_JUDGE_VENV/bin/python" ] && [ -f "$stamp" ]; then
    return 0
  fi
  if ! "$IMAGES_JUDGE_VENV/bin/python" -c "import PIL, sys; sys.exit(PIL.__version__ != '$PILLOW_VERSION')" 2>/dev/null; then
    log "installing Pillow $PILLOW_VERSION into $IMAGES_JUDGE_VENV"
    mkdir -p "$UPCOMMIT_CACHE"
    rm -rf "$IMAGES_JUDGE_VENV"
    python3 -m venv "$IMAGES_JUDGE_VENV"
    "$IMAGES_JUDGE_VENV/bin/pip" install --quiet --disable-pip-version-check "Pillow==$PILLOW_VERSION"
  fi
  log "installing pillow-heif $PILLOW_HEIF_VERSION into $IMAGES_JUDGE_VENV"
  if "$IMAGES_JUDGE_VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps "pillow-heif==$PILLOW_HEIF_VERSION" &&
    "$IMAGES_JUDGE_VENV/bin/python" -c "import pillow_heif" 2>/dev/null; then
    touch "$stamp"
  else
    log "pillow-heif $PILLOW_HEIF_VERSION did not install: the HEIC cases (and AVIF, without Pillow's plugin) will be skipped"
  fi
}

ensure_images_judge_installed
start_localstack
work=$(mktemp -d)
server_pid=""
judge_db=""
psql=psql
cleanup_images_judge() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$judge_db" ]; then
    "$psql" -q "$UPCOMMIT_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $judge_db" || true
  fi
  rm -rf "$work"
  stop_localstack
}
trap cleanup_images_judge EXIT

# Every variant is judged on every fixture: each fit in JPEG, inside and contain in WebP (alpha
# kept, contain's padding transparent), inside in AVIF, and a cover of another shape. The
# fixtures are 240x160 as displayed, so every box gives whole sizes.
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
format = "jpeg"
quality = 85

[[profiles.variants]]
name = "wide"
width = 80
height = 40
fit = "cover"

[[profiles.variants]]
name = "contain"
width = 90
height = 90
fit = "contain"
format = "jpeg"

[[profiles.variants]]
name = "inside"
width = 60
height = 60
fit = "inside"
format = "jpeg"

[[profiles.variants]]
name = "webp"
width = 60
height = 60
fit = "inside"
format = "webp"

[[profiles.variants]]
name = "webp_contain"
width = 90
height = 90
fit = "contain"
format = "webp"

[[profiles.variants]]
name = "avif"
width = 60
height = 60
fit = "inside"
format = "avif"

[[profiles]]
name = "tiny"
content_types = ["image/png", "image/jpeg"]
max_size = 1000000
final_prefix = "tiny/"
max_pixels = 5000

[[profiles]]
name = "sized"
content_types = ["image/png", "image/jpeg"]
max_size = 1000000
final_prefix = "sized/"
min_width = 100
max_width = 300
min_height = 50
max_height = 200
TOML

if [ -n "${UPCOMMIT_JUDGE_BIN:-}" ]; then
  bin=$UPCOMMIT_JUDGE_BIN
else
  # The binary the integration tests built (same features: no second build of the dependencies).
  cargo build --locked --tests
  bin="${CARGO_TARGET_DIR:-target}/debug/upcommit"
fi

export UPCOMMIT_S3_ENDPOINT="http://$LOCALSTACK_ADDR"
export UPCOMMIT_CONFIG="$work/upcommit.toml"
export UPCOMMIT_JWT_SECRET="images-judge-secret-0123456789abcdef"
export UPCOMMIT_ACCEPT_STORE_GAPS="$LOCALSTACK_GAPS"
export UPCOMMIT_PRESIGN_RATE_PER_SEC=0 UPCOMMIT_QUOTA_DAILY_UPLOADS=0 UPCOMMIT_QUOTA_DAILY_BYTES=0
export RUST_LOG="${RUST_LOG:-warn}"

# judge LABEL DATABASE_URL: one server on a fresh bucket, the judge against it, the server
# stopped. Returns the judge's status, or 1 if the server logged an error or a panic.
judge() {
  local label=$1 status=0 port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  export DATABASE_URL=$2
  export UPCOMMIT_LISTEN="127.0.0.1:$port"
  export UPCOMMIT_CORS_ORIGINS="http://$UPCOMMIT_LISTEN"
  export UPCOMMIT_BUCKET="images-judge-$label-$(date +%s)-$$"
  # Called behind `||`, where errexit is off: every step that can fail says so itself.
  serve_for_script "$bin" "$work" || return 1
  server_pid=$SERVED_PID
  local token=""
  token=$("$bin" token --sub images-judge --ttl 1h) || status=1
  if [ -n "$token" ]; then
    log "Pillow $PILLOW_VERSION judges the images of http://$UPCOMMIT_LISTEN ($label)"
    "$IMAGES_JUDGE_VENV/bin/python" tests/images/judge.py "http://$UPCOMMIT_LISTEN" "$token" "$UPCOMMIT_CONFIG" || status=$?
  fi
  if grep -q 'ERROR\|panicked' "$work/server.log"; then
    log "the server logged errors during the $label run:"
    grep 'ERROR\|panicked' "$work/server.log" | head -20 >&2
    status=1
  fi
  if [ "$status" -ne 0 ]; then
    log "the judge failed on $label; the server's log ends:"
    tail -n 40 "$work/server.log" >&2
  fi
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
  mv "$work/server.log" "$work/server-$label.log"
  return "$status"
}

overall=0
judge sqlite "sqlite://$work/upcommit.db" || overall=1
if [ -n "${UPCOMMIT_TEST_PG_URL:-}" ]; then
  judge_db="images_judge_$(date +%s)_$$"
  psql=$(command -v psql || echo "$(pg_bindir)/psql")
  "$psql" -q "$UPCOMMIT_TEST_PG_URL" -c "CREATE DATABASE $judge_db"
  judge postgres "${UPCOMMIT_TEST_PG_URL%/*}/$judge_db" || overall=1
fi
if [ "$overall" -ne 0 ]; then
  log "the images judge failed (cases marked FAIL above)"
fi
exit "$overall"
