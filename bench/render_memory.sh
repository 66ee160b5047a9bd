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
# Usage: bench/render_memory.sh [CASE...]   (CASE: KIND:VARIANT, both files of that kind, or
#        KIND:VARIANT+KIND:VARIANT, one of each; KIND baseline|progressive, VARIANT thumb|large;
#        by default baseline:thumb progressive:thumb baseline:large progressive:large and the
#        pair whose estimates come closest to the default budget together,
#        progressive:thumb+baseline:large). Prints one JSON line per case, then a table.
#        BENCH_SERVER_BIN=path: that server binary, no build. BENCH_KEEP=1 keeps the temp dir
#        (images, server log). BENCH_LOCALSTACK_ADDR, BENCH_LISTEN: ports (4690, 18690).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/renditions_lib.sh
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(baseline:thumb progressive:thumb baseline:large progressive:large progressive:thumb+baseline:large)
bench_server_bin
bench_python
dir=$(mktemp -d /tmp/upcommit-render-memory.XXXXXX)
trap bench_cleanup EXIT

log "making the JPEGs with Pillow in $dir"
"$py" bench/render_memory.py make "$dir" | tee "$dir/images.jsonl" >&2
bench_setup
export UPCOMMIT_RENDER_CONCURRENCY=2
[ -z "${BENCH_RENDER_MEMORY_MIB:-}" ] || export UPCOMMIT_RENDER_MEMORY_MIB=$BENCH_RENDER_MEMORY_MIB

# Each case renders files of its own, committed here (a fresh upload of the same bytes is a new
# file): no case finds another's rendition in cache/. KIND:VARIANT renders files a and b of
# that kind; KIND:VARIANT+KIND:VARIANT file a of the first kind and file b of the second.
bench_start_server
declare -a ids_a ids_b
id_of() { "$py" -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
for i in "${!cases[@]}"; do
  c=${cases[$i]} first=${c%%+*} second=${c#*+}
  ids=$("$py" bench/render_memory.py commit "$BENCH_BASE" image "$dir/${first%%:*}-a.jpg" "$dir/${second%%:*}-b.jpg")
  ids_a[i]=$(id_of "$ids" "${first%%:*}-a.jpg") ids_b[i]=$(id_of "$ids" "${second%%:*}-b.jpg")
done
bench_stop_server

for i in "${!cases[@]}"; do
  c=${cases[$i]} first=${c%%+*} second=${c#*+}
  bench_start_server
  sleep 1
  log "$c: two renders at once (server pid $pid)"
  line=$("$py" bench/render_memory.py render "$BENCH_BASE" "$pid" \
    "${ids_a[i]}@${first##*:}" "${ids_b[i]}@${second##*:}")
  metrics=$(curl -fsS "$BENCH_BASE/metrics" | grep -E '^upcommit_(renders_total|render_memory_budget_bytes|render_slots)' | tr '\n' ';' | sed 's/"/\\"/g' || true)
  bench_stop_server
  echo "{\"case\": \"$c\", \"utc\": \"$(date -u +%FT%TZ)\", \"metrics\": \"$metrics\", \"result\": $line}" | tee -a "$dir/results.jsonl"
done
"$py" - "$dir/results.jsonl" <<'PY'
import json, sys
print("\n| case | RSS before (MiB) | peak VmHWM after (MiB) | max VmRSS sampled (MiB) | max estimates held (MiB) | request A: statuses, time | request B: statuses, time |")
print("|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    c = json.loads(line)
    r = c["result"]
    def req(q):
        a = q["answer"] if isinstance(q["answer"], dict) else {}
        shown = f" {a['width']}x{a['height']}" + (" (cached!)" if a.get("cached") else "") if "width" in a else ""
        return " ".join(str(s["status"]) for s in q["statuses"]) + f", {q['total_s']:.2f} s{shown}"
    print(f"| {c['case']} | {r['rss_before_mib']} | {r['hwm_after_mib']} | {r['max_rss_sampled_mib']} | {r['max_held_estimate_mib']} | "
          f"{req(r['requests'][0])} | {req(r['requests'][1])} |")
PY
sed 's/\x1b\[[0-9;]*m//g' "$dir/server.log" | grep -E 'ERROR|WARN' | grep -v 'upcommit::startup' | tail -n 20 >&2 || true
