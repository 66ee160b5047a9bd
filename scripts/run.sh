#!/usr/bin/env bash
# Runs upcommit locally on the embedded default: SQLite under ./data and a LocalStack S3 that
# this script installs and starts itself, with the bucket created as infra/ creates a real one
# and the lifecycle rules of infra/lifecycle-rules.json written by `upcommit bucket
# apply-lifecycle`, then checked by `upcommit doctor`. The demo upload page is on; the admin
# console (/admin) is on with UPCOMMIT_ADMIN_CONSOLE=true, and then the demo's token minting
# is off. Ctrl-C, or a TERM to this script's own process (a supervisor, `kill` from another
# terminal), stops both: the server first (its graceful drain, and with it its render workers),
# then LocalStack.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

SERVE_PID=""
stop_all() {
  if [ -n "$SERVE_PID" ]; then
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
  fi
  stop_localstack
}
trap stop_all EXIT
# A signal ends the script (and so runs stop_all) at once, even while it waits for the server.
trap 'exit 143' TERM
trap 'exit 130' INT
start_localstack

export UPCOMMIT_BUCKET="${UPCOMMIT_BUCKET:-upcommit-local}"
export UPCOMMIT_S3_ENDPOINT="${UPCOMMIT_S3_ENDPOINT:-http://$LOCALSTACK_ADDR}"
export DATABASE_URL="${DATABASE_URL:-sqlite://data/upcommit.db}"
export UPCOMMIT_LISTEN="${UPCOMMIT_LISTEN:-127.0.0.1:8080}"
export UPCOMMIT_CORS_ORIGINS="${UPCOMMIT_CORS_ORIGINS:-http://$UPCOMMIT_LISTEN}"
# LocalStack does not verify POST signatures: the one store gap this dev setup accepts.
export UPCOMMIT_ACCEPT_STORE_GAPS="${UPCOMMIT_ACCEPT_STORE_GAPS-$LOCALSTACK_GAPS}"
# The browser upload page, with dev-mode token minting: this is a development setup only.
# With the admin console asked for (UPCOMMIT_ADMIN_CONSOLE=true scripts/run.sh), minting
# defaults to off: the server refuses to serve the console beside a page that mints tokens for
# anyone, and the demo page then takes a pasted token.
export UPCOMMIT_DEMO="${UPCOMMIT_DEMO:-true}"
export UPCOMMIT_ADMIN_CONSOLE="${UPCOMMIT_ADMIN_CONSOLE:-false}"
case "${UPCOMMIT_ADMIN_CONSOLE,,}" in true | 1 | yes) console=on ;; *) console=off ;; esac
if [ "$console" = on ]; then
  export UPCOMMIT_DEMO_MINT_TOKENS="${UPCOMMIT_DEMO_MINT_TOKENS:-false}"
else
  export UPCOMMIT_DEMO_MINT_TOKENS="${UPCOMMIT_DEMO_MINT_TOKENS:-true}"
fi
if [ -z "${UPCOMMIT_JWT_SECRET:-}" ]; then
  mkdir -p data
  [ -s data/dev-jwt-secret ] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >data/dev-jwt-secret
  UPCOMMIT_JWT_SECRET=$(cat data/dev-jwt-secret)
  export UPCOMMIT_JWT_SECRET
fi

log "preparing bucket $UPCOMMIT_BUCKET"
"$LOCALSTACK_VENV/bin/python" scripts/dev_bucket.py "$UPCOMMIT_S3_ENDPOINT" "$UPCOMMIT_BUCKET" "$UPCOMMIT_CORS_ORIGINS"

cargo build --locked --bin upcommit
target/debug/upcommit bucket apply-lifecycle --yes
target/debug/upcommit doctor
log "upcommit listens on http://$UPCOMMIT_LISTEN (database $DATABASE_URL, bucket $UPCOMMIT_BUCKET); upload page: http://$UPCOMMIT_LISTEN/demo"
log "mint a token with: UPCOMMIT_JWT_SECRET=\$(cat data/dev-jwt-secret) target/debug/upcommit token --sub alice"
if [ "$console" = on ]; then
  log "admin console: http://$UPCOMMIT_LISTEN/admin — sign in with an admin token: UPCOMMIT_JWT_SECRET=\$(cat data/dev-jwt-secret) target/debug/upcommit token --sub ops --admin"
else
  log "admin console: off (start with UPCOMMIT_ADMIN_CONSOLE=true scripts/run.sh to open it at http://$UPCOMMIT_LISTEN/admin)"
fi
# In the background, waited for: a TERM to this script is handled now, not once serve exits.
target/debug/upcommit serve &
SERVE_PID=$!
wait "$SERVE_PID"
