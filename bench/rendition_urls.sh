#!/usr/bin/env bash
# Throughput of a cached rendition's URL (GET /v1/files/{id}/variants/thumb, a cache hit: the
# handle read from the catalog, the rendition known to this replica — one HEAD of cache/ on the
# store at most every 5 minutes — and a signed GET URL) beside presign
# (POST /v1/uploads with bench/presign.lua's body: signs locally and writes the catalog, no S3
# call), issue 37's goal being the cached route at >= 0.5x presign's throughput. Same release
# server (SQLite in a temp dir, LocalStack 4.14.0 on its own port as the store), same client
# (wrk, Debian's package, -t2), interleaved rounds of SECS seconds at CONNS connections, the
# order alternating each round. The rendition is rendered once before (a 2400 x 1600 JPEG into
# the 720 x 588 cover "thumb") and the first measured GET is checked to answer cached:true.
# Per run: wrk's requests/s, p50/p99, non-2xx count, and the CPU seconds the server and LocalStack
# used (/proc/PID/stat) — everything on this one 2-core machine.
# Usage: bench/rendition_urls.sh [ROUNDS=3] [SECS=5] [CONNS=16]
#        BENCH_SERVER_BIN=path: that server binary, no build. BENCH_KEEP=1 keeps the temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
CONNS=${3:-16}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
source bench/renditions_lib.sh
bench_server_bin
bench_python
dir=$(mktemp -d /tmp/upcommit-rendition-urls.XXXXXX)
trap bench_cleanup EXIT

"$py" bench/render_memory.py small "$dir" >&2
bench_setup
bench_start_server
ids=$("$py" bench/render_memory.py commit "$BENCH_BASE" image "$dir/small.jpg")
id=$("$py" -c 'import json,sys; print(json.loads(sys.argv[1])["small.jpg"])' "$ids")
log "first GET (renders): $("$py" bench/render_memory.py get "$BENCH_BASE" "$id" thumb)"
second=$("$py" bench/render_memory.py get "$BENCH_BASE" "$id" thumb)
log "second GET: $second"
case $second in *'"cached":true'*) ;; *) log "the second GET was not a cache hit"; exit 1 ;; esac

cpu_s() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat"; }
ls_pid=${STARTED_LOCALSTACK_PID:-}
run() {
  local name=$1 round=$2 out s0 l0 s1 l1
  shift 2
  s0=$(cpu_s "$pid"); l0=$([ -n "$ls_pid" ] && cpu_s "$ls_pid" || echo 0)
  out=$(wrk -t2 -c"$CONNS" -d"${SECS}s" --latency "$@")
  s1=$(cpu_s "$pid"); l1=$([ -n "$ls_pid" ] && cpu_s "$ls_pid" || echo 0)
  echo "$out" >>"$dir/wrk.log"
  local rps p50 p99 reqs non2xx errors
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
  errors=$(grep -E 'Socket errors' <<<"$out" | sed 's/^ *//' || true)
  echo "{\"route\": \"$name\", \"round\": $round, \"utc\": \"$(date -u +%FT%TZ)\", \"requests\": $reqs, \"rps\": $rps, \"p50\": \"$p50\", \"p99\": \"$p99\", \"non_2xx\": ${non2xx:-0}, \"server_cpu_s\": $(awk -v a="$s0" -v b="$s1" 'BEGIN {printf "%.2f", b - a}'), \"localstack_cpu_s\": $(awk -v a="$l0" -v b="$l1" 'BEGIN {printf "%.2f", b - a}'), \"socket_errors\": \"$errors\"}" |
    tee -a "$dir/results.jsonl"
}
presign() { run presign "$1" -s bench/presign.lua "$BENCH_BASE/v1/uploads"; }
cached() { run cached_rendition "$1" -H "Authorization: Bearer $UPCOMMIT_BENCH_TOKEN" "$BENCH_BASE/v1/files/$id/variants/thumb"; }
for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) -eq 1 ]; then presign "$round"; cached "$round"; else cached "$round"; presign "$round"; fi
done
log "after the runs: $("$py" bench/render_memory.py get "$BENCH_BASE" "$id" thumb)"
curl -fsS "$BENCH_BASE/metrics" | grep -E '^upcommit_rendition_cache_total' >&2 || true
"$py" - "$dir/results.jsonl" "$SECS" "$CONNS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"\n| round | route | requests/s | p50 | p99 | non-2xx | server CPU s | LocalStack CPU s |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['round']} | {r['route']} | {r['rps']:.0f} | {r['p50']} | {r['p99']} | {r['non_2xx']} | {r['server_cpu_s']} | {r['localstack_cpu_s']} |")
tot = {}
for r in rows:
    t = tot.setdefault(r["route"], [0, 0])
    t[0] += r["requests"]; t[1] += 1
secs = float(sys.argv[2])
rate = {k: v[0] / (v[1] * secs) for k, v in tot.items()}
for k, v in rate.items():
    print(f"{k}: {v:.0f} requests/s over {tot[k][1]} runs of {secs:.0f} s at {sys.argv[3]} connections")
per_round = {}
for r in rows:
    per_round.setdefault(r["round"], {})[r["route"]] = r["rps"]
ratios = [v["cached_rendition"] / v["presign"] for v in per_round.values() if len(v) == 2]
print(f"ratio cached/presign: {rate['cached_rendition'] / rate['presign']:.2f} "
      f"(per round: {', '.join(f'{x:.2f}' for x in ratios)})")
PY
