#!/usr/bin/env bash
# The alert rules end to end: a real Prometheus (Debian's package) with
# deploy/prometheus/upcommit-rules.yml scrapes a real upcommit every second and evaluates the
# rules every second. upcommit runs as scripts/run.sh runs it (a fresh versioned, encrypted
# LocalStack bucket with our lifecycle rules written by `upcommit bucket apply-lifecycle --yes`,
# SQLite in a temp dir), with the drift watch every 2 s. Once the bucket passes every check and
# no alert is pending or firing (a healthy server fires nothing), the bucket's lifecycle
# configuration is deleted with boto3, as a second writer would; UpcommitBucketCheckFailing must
# go pending, then firing after the rule's own `for` (the real rule, unchanged), for
# check="lifecycle_required_rules" and nothing else. Then `upcommit bucket apply-lifecycle --yes`
# puts the rules back and the alert must resolve. Each state change is printed with its time.
# About 45 s; fails past limits that add a margin to the rule's `for`.
#
# Called by scripts/test.sh after LocalStack is up; standalone: LOCALSTACK_ADDR must answer.
# Free loopback ports unless ALERTS_E2E_APP_PORT / ALERTS_E2E_PROMETHEUS_PORT name them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_localstack_installed
ensure_prometheus_installed
if ! localstack_up; then
  log "LocalStack does not answer on $LOCALSTACK_ADDR (scripts/test.sh starts it)"
  exit 1
fi

repo=$PWD
work=$(mktemp -d)
prometheus_pid=""
SERVED_PID=""
cleanup_alerts_e2e() {
  local pid
  for pid in "$prometheus_pid" "$SERVED_PID"; do
    [ -n "$pid" ] || continue
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup_alerts_e2e EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The binary the integration tests built (same features: no second build of the dependencies).
cargo build --locked --tests
bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/upcommit"

app_port=${ALERTS_E2E_APP_PORT:-$(free_port)}
export UPCOMMIT_BUCKET="prom-e2e-$(date +%s)-$$"
export UPCOMMIT_S3_ENDPOINT="http://$LOCALSTACK_ADDR"
export DATABASE_URL="sqlite://$work/upcommit.db"
export UPCOMMIT_LISTEN="127.0.0.1:$app_port"
export UPCOMMIT_CORS_ORIGINS="http://$UPCOMMIT_LISTEN"
export UPCOMMIT_ACCEPT_STORE_GAPS="$LOCALSTACK_GAPS"
export UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS=2
export RUST_LOG="${RUST_LOG:-warn}"
UPCOMMIT_JWT_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export UPCOMMIT_JWT_SECRET
serve_for_script "$bin" "$work"

prom_port=${ALERTS_E2E_PROMETHEUS_PORT:-$(free_port)}
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $repo/deploy/prometheus/upcommit-rules.yml
scrape_configs:
  - job_name: upcommit
    static_configs:
      - targets: ["$UPCOMMIT_LISTEN"]
YAML
log "prometheus $(prometheus --version 2>&1 | head -1 | cut -d' ' -f3) on 127.0.0.1:$prom_port scraping upcommit on $UPCOMMIT_LISTEN (bucket $UPCOMMIT_BUCKET)"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
prometheus_pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$prom_port/-/ready" >/dev/null 2>&1 && break
  kill -0 "$prometheus_pid" 2>/dev/null || break
  sleep 0.1
done
if ! curl -fsS "http://127.0.0.1:$prom_port/-/ready" >/dev/null 2>&1; then
  tail -n 40 "$work/prometheus.log" >&2
  log "prometheus did not start"
  exit 1
fi

status=0
"$LOCALSTACK_VENV/bin/python" - "http://127.0.0.1:$prom_port" "$bin" <<'PY' || status=$?
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import boto3

prom, upcommit = sys.argv[1], sys.argv[2]
bucket = os.environ["UPCOMMIT_BUCKET"]
ALERT = "UpcommitBucketCheckFailing"
started = time.monotonic()


def say(msg):
    elapsed = time.monotonic() - started
    print(f"[{time.strftime('%H:%M:%S', time.gmtime())} +{elapsed:4.1f}s] {msg}", file=sys.stderr, flush=True)


def api(path):
    with urllib.request.urlopen(prom + path, timeout=5) as resp:
        body = json.load(resp)
    if body.get("status") != "success":
        sys.exit(f"{path}: {body}")
    return body["data"]


def query(q):
    return api("/api/v1/query?" + urllib.parse.urlencode({"query": q}))["result"]


def rule():
    for group in api("/api/v1/rules?type=alert")["groups"]:
        for r in group["rules"]:
            if r["name"] == ALERT:
                return r
    sys.exit(f"{ALERT} is not loaded")


def alerts():
    return api("/api/v1/alerts")["alerts"]


def wait(what, seconds, check):
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            sys.exit(f"no {what} within {seconds} s; alerts: {json.dumps(alerts())}")
        time.sleep(0.2)


def healthy():
    checks = query("upcommit_bucket_check_ok")
    r = rule()
    return (
        len(checks) == 7
        and all(c["value"][1] == "1" for c in checks)
        and r["health"] == "ok"
        and r["state"] == "inactive"
        and r.get("lastEvaluation", "").startswith("2")
    )


wait("scrape showing every bucket check passing, with the alert inactive", 30, healthy)
say(f"every bucket check passes; {ALERT} inactive")
# Let a few more evaluations pass: a healthy server must fire nothing, pending included.
time.sleep(3)
if alerts():
    sys.exit(f"alerts on a healthy server: {json.dumps(alerts())}")
say("no alert pending or firing")

boto3.client("s3", endpoint_url=os.environ["UPCOMMIT_S3_ENDPOINT"], region_name="us-east-1").delete_bucket_lifecycle(Bucket=bucket)
deleted = time.monotonic()
say("deleted the bucket's lifecycle configuration (boto3 DeleteBucketLifecycle)")

wait("scrape showing the check failing", 10,
     lambda: query('upcommit_bucket_check_ok{check="lifecycle_required_rules"} == 0'))
say("scraped upcommit_bucket_check_ok{check=\"lifecycle_required_rules\"} 0")
states = [("inactive", 0.0)]
for_secs = float(rule()["duration"])


def transition():
    state = rule()["state"]
    if state != states[-1][0]:
        states.append((state, time.monotonic() - deleted))
        say(f"{ALERT}: {state}")
    return state == "firing"


wait(f"{ALERT} firing", for_secs + 20, transition)
firing = alerts()
expected = {"alertname": ALERT, "check": "lifecycle_required_rules", "severity": "critical"}
if len(firing) != 1 or firing[0]["labels"] != expected or firing[0]["state"] != "firing":
    sys.exit(f"expected exactly {expected} firing, got {json.dumps(firing)}")
names = [s for s, _ in states]
if names != ["inactive", "pending", "firing"]:
    sys.exit(f"expected inactive, pending, firing; got {names}")
pending_for = states[2][1] - states[1][1]
if pending_for < for_secs - 1:
    sys.exit(f"fired after {pending_for:.1f} s pending, before the rule's for ({for_secs:.0f} s)")
say(f"firing: {firing[0]['labels']}, active since {firing[0]['activeAt']}, "
    f"{pending_for:.1f} s pending (for: {for_secs:.0f}s), runbook {firing[0]['annotations']['runbook_url']}")

subprocess.run([upcommit, "bucket", "apply-lifecycle", "--yes"], check=True, stdout=subprocess.DEVNULL)
say("upcommit bucket apply-lifecycle --yes")
wait(f"{ALERT} resolved", 15, lambda: rule()["state"] == "inactive" and not alerts())
say(f"{ALERT}: inactive again, no alert")
PY

if [ "$status" -ne 0 ]; then
  log "alerts e2e failed; upcommit's log:"
  tail -n 20 "$work/server.log" >&2
  log "prometheus's log:"
  tail -n 20 "$work/prometheus.log" >&2
fi
exit $status
