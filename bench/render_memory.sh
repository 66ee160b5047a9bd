#!/usr/bin/env bash
# Peak memory of the whole server process while two renders of a 50-megapixel JPEG run at once
# (issue 37's goal: under 300 MiB for the process). Pillow writes four 8660 x 5774 photo-like
# JPEGs in the run (about 10 MB each: two baseline, two progressive, quality 90, 4:2:0); they
# are committed through the API (presign, PUT, commit) to a release server on LocalStack 4.14.0
# (SQLite in a temp dir, UPCOMMIT_RENDER_CONCURRENCY=2, the default memory budget unless
# BENCH_RENDER_MEMORY_MIB says otherwise). Then per case a fresh server process, and two
# requests for the case's variant of two different files at once, each retrying a 503
# render_busy after its Retry-After: the process's VmRSS and VmHWM (/proc/PID/status) before,
# VmHWM after both answered 200, the largest VmRSS sampled every 10 ms, each request's statuses
# and times. Cases: baseline and progressive, into "thumb" (720 x 588, cover) and "large"
# (4000 x 4000, inside).
# Usage: bench/render_memory.sh [CASE...]   (CASE: baseline:thumb progressive:thumb
#        baseline:large progressive:large; all four by default). Prints one JSON line per case,
#        then a table. BENCH_SERVER_BIN=path: that server binary, no build. BENCH_KEEP=1 keeps
#        the temp dir (images, server log).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/renditions_lib.sh
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(baseline:thumb progressive:thumb baseline:large progressive:large)
bench_server_bin
bench_python
dir=$(mktemp -d /tmp/upcommit-render-memory.XXXXXX)
trap bench_cleanup EXIT

log "making the JPEGs with Pillow in $dir"
"$py" bench/render_memory.py make "$dir" | tee "$dir/images.jsonl" >&2
bench_setup
export UPCOMMIT_RENDER_CONCURRENCY=2
[ -z "${BENCH_RENDER_MEMORY_MIB:-}" ] || export UPCOMMIT_RENDER_MEMORY_MIB=$BENCH_RENDER_MEMORY_MIB

bench_start_server
ids=$("$py" bench/render_memory.py commit "$BENCH_BASE" image \
  "$dir"/baseline-a.jpg "$dir"/baseline-b.jpg "$dir"/progressive-a.jpg "$dir"/progressive-b.jpg)
bench_stop_server
id_of() { "$py" -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$ids" "$1"; }

for c in "${cases[@]}"; do
  kind=${c%%:*} variant=${c##*:}
  bench_start_server
  sleep 1
  log "$kind:$variant: two renders at once (server pid $pid)"
  line=$("$py" bench/render_memory.py render "$BENCH_BASE" "$pid" "$variant" \
    "$(id_of "$kind-a.jpg")" "$(id_of "$kind-b.jpg")")
  metrics=$(curl -fsS "$BENCH_BASE/metrics" | grep -E '^upcommit_(renders_total|render_memory_budget_bytes|render_slots)' | tr '\n' ';' || true)
  bench_stop_server
  echo "{\"case\": \"$kind:$variant\", \"utc\": \"$(date -u +%FT%TZ)\", \"metrics\": \"$metrics\", \"result\": $line}" | tee -a "$dir/results.jsonl"
done
"$py" - "$dir/results.jsonl" <<'PY'
import json, sys
print("\n| case | RSS before (MiB) | peak VmHWM after (MiB) | max VmRSS sampled (MiB) | request A: statuses, time | request B: statuses, time |")
print("|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    c = json.loads(line)
    r = c["result"]
    def req(q):
        return " ".join(str(s["status"]) for s in q["statuses"]) + f", {q['total_s']:.2f} s"
    print(f"| {c['case']} | {r['rss_before_mib']} | {r['hwm_after_mib']} | {r['max_rss_sampled_mib']} | "
          f"{req(r['requests'][0])} | {req(r['requests'][1])} |")
PY
grep -E 'ERROR|WARN' "$dir/server.log" | tail -n 20 >&2 || true
