#!/usr/bin/env bash
# Runs upcommit locally on the embedded default: SQLite under ./data and a LocalStack S3 that
# this script installs and starts itself, with the bucket created as infra/ creates a real one
# and the lifecycle rules of infra/lifecycle-rules.json written by `upcommit bucket
# apply-lifecycle`, then checked by `upcommit doctor`. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

trap stop_localstack EXIT
start_localstack

export UPCOMMIT_BUCKET="${UPCOMMIT_BUCKET:-upcommit-local}"
export UPCOMMIT_S3_ENDPOINT="${UPCOMMIT_S3_ENDPOINT:-http://$LOCALSTACK_ADDR}"
export DATABASE_URL="${DATABASE_URL:-sqlite://data/upcommit.db}"
export UPCOMMIT_LISTEN="${UPCOMMIT_LISTEN:-127.0.0.1:8080}"
export UPCOMMIT_CORS_ORIGINS="${UPCOMMIT_CORS_ORIGINS:-http://$UPCOMMIT_LISTEN}"
# LocalStack does not verify POST signatures: the one store gap this dev setup accepts.
export UPCOMMIT_ACCEPT_STORE_GAPS="${UPCOMMIT_ACCEPT_STORE_GAPS-$LOCALSTACK_GAPS}"
# The browser upload page, with dev-mode token minting: this is a development setup only.
export UPCOMMIT_DEMO="${UPCOMMIT_DEMO:-true}"
export UPCOMMIT_DEMO_MINT_TOKENS="${UPCOMMIT_DEMO_MINT_TOKENS:-true}"
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
target/debug/upcommit serve
