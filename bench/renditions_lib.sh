# Shared by bench/render_memory.sh and bench/rendition_urls.sh (issue 37): LocalStack on a port
# of their own, a bucket with the project's settings, and a release server with a profile whose
# variants are the benchmarks' boxes. Sourced from the repository's root after set -euo pipefail.
# shellcheck shell=bash

# Ports of their own: a test run may hold the default ones (set before lib.sh reads them).
export LOCALSTACK_ADDR=${BENCH_LOCALSTACK_ADDR:-127.0.0.1:4690}
source scripts/lib.sh

BENCH_LISTEN=${BENCH_LISTEN:-127.0.0.1:18690}
BENCH_BASE="http://$BENCH_LISTEN"
pid=""

# The server binary: BENCH_SERVER_BIN (built elsewhere, e.g. a copy kept while others edit the
# tree), else this tree's release build.
bench_server_bin() {
  if [ -n "${BENCH_SERVER_BIN:-}" ]; then
    server=$BENCH_SERVER_BIN
  else
    ensure_turbojpeg_installed
    cargo build --release --locked --bin upcommit
    server=${CARGO_TARGET_DIR:-target}/release/upcommit
  fi
  log "server binary: $server ($(stat -c '%y' "$server"))"
}

# Pillow's venv (the one bench/render_vs_sharp.sh uses): made when it is missing.
bench_python() {
  local venv="$HOME/.cache/upcommit/pillow-venv"
  [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import PIL' 2>/dev/null ||
    { python3 -m venv "$venv" && "$venv/bin/pip" install -q Pillow; }
  py="$venv/bin/python"
}

# LocalStack (its log in $dir, not the shared cache's), the bucket as scripts/run.sh makes it,
# the settings file and the server's environment.
bench_setup() {
  UPCOMMIT_CACHE="$dir" start_localstack
  export UPCOMMIT_S3_ENDPOINT="http://$LOCALSTACK_ADDR" UPCOMMIT_BUCKET="bench-renditions-$(date +%s)"
  export UPCOMMIT_ACCEPT_STORE_GAPS=$LOCALSTACK_GAPS UPCOMMIT_CORS_ORIGINS=http://localhost
  "$LOCALSTACK_VENV/bin/python" scripts/dev_bucket.py "$UPCOMMIT_S3_ENDPOINT" "$UPCOMMIT_BUCKET" "$UPCOMMIT_CORS_ORIGINS"
  cat >"$dir/upcommit.toml" <<'TOML'
[[profiles]]
name = "image"
content_types = ["image/jpeg", "image/png"]
max_size = 67108864
final_prefix = "media/images/"

[[profiles.variants]]
name = "thumb"
width = 720
height = 588
fit = "cover"
quality = 80

[[profiles.variants]]
name = "large"
width = 4000
height = 4000
fit = "inside"
quality = 80
TOML
  export UPCOMMIT_CONFIG="$dir/upcommit.toml"
  export UPCOMMIT_JWT_SECRET=bench-secret-0123456789abcdef UPCOMMIT_LISTEN=$BENCH_LISTEN
  export DATABASE_URL="sqlite://$dir/bench.db?mode=rwc"
  export UPCOMMIT_QUOTA_DAILY_UPLOADS=0 UPCOMMIT_QUOTA_DAILY_BYTES=0 UPCOMMIT_PRESIGN_RATE_PER_SEC=0
  export UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS=0 UPCOMMIT_SWEEP_INTERVAL_SECS=0 UPCOMMIT_HYGIENE_INTERVAL_SECS=0
  export RUST_LOG=warn
  "$server" bucket apply-lifecycle --yes >/dev/null
  UPCOMMIT_BENCH_TOKEN=$("$server" token --sub bench --ttl 2h)
  export UPCOMMIT_BENCH_TOKEN
}

# A fresh server process (its log appended to $dir/server.log); sets pid.
bench_start_server() {
  "$server" serve 2>>"$dir/server.log" &
  pid=$!
  for _ in $(seq 100); do
    curl -fs "$BENCH_BASE/healthz" >/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 40 "$dir/server.log" >&2
  log "upcommit serve did not start"
  return 1
}

bench_stop_server() {
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}

bench_cleanup() {
  bench_stop_server
  stop_localstack
  if [ -n "${BENCH_KEEP:-}" ]; then log "kept $dir"; else rm -rf "$dir"; fi
}
