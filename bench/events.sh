#!/usr/bin/env bash
# Event delivery throughput to a local receiver: N events written straight into the outbox
# (the delivery path alone: sequencer, fan-out, claims, signed POSTs, outcomes), timed until
# every delivery is recorded delivered. Release build; SQLite by default, PostgreSQL with
# BENCH_DB=postgres. Usage: bench/events.sh [N=20000] [CONCURRENCY=8]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
n=${1:-20000}
concurrency=${2:-8}
trap 'kill ${pid:-} ${sink:-} 2>/dev/null; stop_postgres; stop_localstack; rm -rf "${dir:-}"' EXIT
start_localstack
cargo build --release --locked --bin upcommit
bin=${CARGO_TARGET_DIR:-target}/release/upcommit
dir=$(mktemp -d)
if [ "${BENCH_DB:-sqlite}" = postgres ]; then
  start_postgres
  "$PG_BIN/psql" "$PG_URL" -qc "CREATE DATABASE bench_events" >/dev/null
  export DATABASE_URL="${PG_URL%/*}/bench_events"
else
  export DATABASE_URL="sqlite://$dir/e.db"
fi
secret="whsec_$(head -c 32 /dev/urandom | base64)"
export UPCOMMIT_JWT_SECRET=bench-secret-0123456789abcdef UPCOMMIT_LISTEN=127.0.0.1:18486
export UPCOMMIT_BUCKET="bench-events-$(date +%s)" UPCOMMIT_S3_ENDPOINT="http://$LOCALSTACK_ADDR"
export UPCOMMIT_ACCEPT_STORE_GAPS=${UPCOMMIT_ACCEPT_STORE_GAPS:-post_signature} # LocalStack does not check POST policy signatures (docs/stores.md)
export UPCOMMIT_CORS_ORIGINS=http://localhost RUST_LOG=warn
export UPCOMMIT_WEBHOOK_URL=http://127.0.0.1:18487/hook UPCOMMIT_WEBHOOK_SECRET="$secret"
export UPCOMMIT_WEBHOOK_CONCURRENCY="$concurrency" UPCOMMIT_WEBHOOK_ID=bench
"$LOCALSTACK_VENV/bin/python" scripts/dev_bucket.py "$UPCOMMIT_S3_ENDPOINT" "$UPCOMMIT_BUCKET" "$UPCOMMIT_CORS_ORIGINS" >/dev/null
python3 bench/webhook_sink.py 18487 & sink=$!
"$bin" serve & pid=$!
for _ in $(seq 100); do curl -fs "http://$UPCOMMIT_LISTEN/healthz" >/dev/null && break; sleep 0.1; done
python3 - "$DATABASE_URL" "$n" "${PG_BIN:-/usr/bin}/psql" <<'PY'
import json, sys, time, uuid
url, n = sys.argv[1], int(sys.argv[2])
rows = []
for i in range(n):
    eid = "evt_" + uuid.uuid4().hex
    subject = uuid.uuid4().hex
    at = time.strftime("%Y-%m-%dT%H:%M:%S.000000+00:00", time.gmtime())
    payload = json.dumps({"type": "file.committed", "timestamp": at.replace("+00:00", "Z"),
                          "data": {"id": subject, "key": f"media/bench/{i}.png", "size": 1000}})
    rows.append((eid, "file.committed", subject, at, payload))
if url.startswith("sqlite://"):
    import sqlite3
    db = sqlite3.connect(url[len("sqlite://"):], timeout=30)
    db.executemany("INSERT INTO events (id, type, subject, occurred_at, payload) VALUES (?, ?, ?, ?, ?)", rows)
    db.commit()
else:
    import subprocess
    copy = "\n".join("\t".join(r) for r in rows) + "\n"
    subprocess.run([sys.argv[3], url, "-qc", "COPY events (id, type, subject, occurred_at, payload) FROM STDIN"],
                   input=copy.encode(), check=True)
PY
start=$(date +%s.%N)
count() {
  if [ "${BENCH_DB:-sqlite}" = postgres ]; then
    "$PG_BIN/psql" "$DATABASE_URL" -tAc "SELECT COUNT(*) FROM event_deliveries WHERE state = 'delivered'"
  else
    python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1], timeout=30).execute(\"SELECT COUNT(*) FROM event_deliveries WHERE state = 'delivered'\").fetchone()[0])" "${DATABASE_URL#sqlite://}"
  fi
}
while [ "$(count)" -lt "$n" ]; do sleep 0.2; done
end=$(date +%s.%N)
python3 -c "import sys; n, s, e = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); print(f'{n} events delivered in {e - s:.2f} s: {n / (e - s):.0f} events/s (db={sys.argv[4]}, concurrency={sys.argv[5]})')" "$n" "$start" "$end" "${BENCH_DB:-sqlite}" "$concurrency"
curl -fsS "http://$UPCOMMIT_LISTEN/metrics" | grep -E "^upcommit_(event|webhook|outbox)" | grep -v _bucket | head -20 || true
