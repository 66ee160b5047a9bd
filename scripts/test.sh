#!/usr/bin/env bash
# Runs every test: formatting, unit tests, and the integration suite against LocalStack's S3
# (signature validation on) on SQLite and then on PostgreSQL. Installs and starts what it
# needs from nothing: a LocalStack venv (cached under ~/.cache/upcommit) and a throwaway
# PostgreSQL cluster; stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

cleanup() {
  stop_postgres
  stop_localstack
}
trap cleanup EXIT

if ! command -v cargo >/dev/null; then
  log "cargo is required (rustup.rs)"
  exit 1
fi
if ! command -v curl >/dev/null; then
  apt-get update -qq && apt-get install -y -qq curl >/dev/null
fi

log "checking formatting"
cargo fmt --check

log "lints"
cargo clippy --all-targets --locked -- -D warnings

log "building"
cargo build --tests --locked

start_localstack
start_postgres
export UPCOMMIT_TEST_S3_ENDPOINT="http://$LOCALSTACK_ADDR"
export UPCOMMIT_TEST_PG_URL="$PG_URL"

log "unit tests"
cargo test --locked --lib --bins

log "integration tests on SQLite"
UPCOMMIT_TEST_DATABASE=sqlite cargo test --locked --test api

log "integration tests on PostgreSQL"
UPCOMMIT_TEST_DATABASE=postgres cargo test --locked --test api

log "all tests passed"
