#!/usr/bin/env bash
# Runs the README's walkthrough as a newcomer would, so that it cannot drift from the code:
# every ```sh block between "## Walkthrough with curl" and the next "## " heading, in order, in
# one bash session (later blocks use the TOKEN and SIZE of the first), in a fresh shell that has
# none of this script's environment (only HOME and PATH, as a second terminal), from a directory
# laid out like a clone after scripts/run.sh: `target/debug/upcommit` is the built binary and
# `data/dev-jwt-secret` the development secret the server runs with. The server is started as
# scripts/run.sh starts it (a fresh LocalStack bucket with the lifecycle rules, SQLite in the
# temp dir, the demo on), on 127.0.0.1:8080 when that port is free, otherwise on a free port
# written into the blocks in place of 8080.
#
# Fails on a block that exits non-zero (each runs under `set -euo pipefail`), on "command not
# found", on any JSON error envelope from the server (`unauthorized` included), and on any HTTP
# status the blocks print (curl -w '%{http_code}') that is not 2xx. No block is skipped: the
# blocks outside this section (scripts/run.sh, scripts/test.sh) are the commands that start the
# server and call this script.
#
# Called by scripts/test.sh after LocalStack is up; standalone: LOCALSTACK_ADDR must answer.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_localstack_installed
repo=$PWD
work=$(mktemp -d)
server_pid=""
cleanup_walkthrough() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup_walkthrough EXIT

port=$(python3 -c '
import socket
s = socket.socket()
try:
    s.bind(("127.0.0.1", 8080))
except OSError:
    s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')

# The blocks, in order, each in its own group so a failure names it.
python3 - "$repo/README.md" "$port" >"$work/walkthrough.sh" <<'PY'
import re, sys
readme, port = open(sys.argv[1]).read(), sys.argv[2]
section = readme.split("\n## Walkthrough with curl\n", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"^```sh\n(.*?)^```$", section, re.S | re.M)
if len(blocks) < 4:
    sys.exit(f"expected the walkthrough's sh blocks in README.md, found {len(blocks)}")
for i, block in enumerate(blocks, 1):
    print(f"echo '--- README walkthrough block {i} of {len(blocks)}' >&2")
    print(block.replace("127.0.0.1:8080", f"127.0.0.1:{port}"))
PY

export UPCOMMIT_BUCKET="walkthrough-$(date +%s)-$$"
export UPCOMMIT_S3_ENDPOINT="http://$LOCALSTACK_ADDR"
export DATABASE_URL="sqlite://$work/upcommit.db"
export UPCOMMIT_LISTEN="127.0.0.1:$port"
export UPCOMMIT_CORS_ORIGINS="http://$UPCOMMIT_LISTEN"
export UPCOMMIT_DEMO=true UPCOMMIT_DEMO_MINT_TOKENS=true
export UPCOMMIT_ACCEPT_STORE_GAPS="$LOCALSTACK_GAPS"
export RUST_LOG="${RUST_LOG:-warn}"
mkdir -p "$work/clone/data" "$work/clone/target/debug"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/clone/data/dev-jwt-secret"
UPCOMMIT_JWT_SECRET=$(cat "$work/clone/data/dev-jwt-secret")
export UPCOMMIT_JWT_SECRET

# The binary the integration tests built (same features: no second build of the dependencies).
cargo build --locked --tests
bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/upcommit"
ln -s "$bin" "$work/clone/target/debug/upcommit"
serve_for_script "$bin" "$work"
server_pid=$SERVED_PID

log "README walkthrough against http://$UPCOMMIT_LISTEN"
# A PATH without any installed upcommit: the README must name the binary it built.
clean_path=$(IFS=:; for d in $PATH; do [ -x "$d/upcommit" ] || printf '%s:' "$d"; done)
status=0
(cd "$work/clone" && env -i HOME="$HOME" PATH="${clean_path%:}" bash -euo pipefail "$work/walkthrough.sh") \
  >"$work/out.log" 2>&1 || status=$?
cat "$work/out.log" >&2
fail() {
  log "README walkthrough: $*"
  status=1
}
[ "$status" -eq 0 ] || fail "a block exited with status $status"
if grep -q 'command not found' "$work/out.log"; then fail "a command is not found"; fi
if grep -q '"error":{' "$work/out.log"; then fail "the server answered an error"; fi
if grep -Eqx '[013-9][0-9][0-9]' "$work/out.log"; then fail "an HTTP status other than 2xx"; fi
if [ "$status" -ne 0 ]; then
  log "server log:"
  tail -20 "$work/server.log" >&2
fi
exit $status
