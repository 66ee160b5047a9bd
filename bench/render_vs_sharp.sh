#!/usr/bin/env bash
# upcommit's renderer beside sharp (issue 37), on sharp's own benchmark task (decode a 2725 ×
# 2225 JPEG, resize to 720 × 588 with Lanczos3, encode JPEG at quality 80), in one run on this
# machine: two synthetic inputs sharp writes (noisy, 2.7 MB; photo-like), one and two renders at
# a time, each side alternating with the other for ROUNDS rounds of SECS seconds. sharp 0.35.6
# comes from npm (its prebuilt libvips) into ~/.cache/upcommit/sharp-0.35.6. Prints one JSON line
# per measurement, then the renditions' mean colours side by side (Pillow, PyPI) as a check that
# both drew the same picture.
# Each upcommit measurement is made twice: in-process (the renderer on threads) and jailed (each
# render in a worker process, through the pool the route uses: issue 46).
# Usage: bench/render_vs_sharp.sh [SECS=10] [ROUNDS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
SECS=${1:-10}
ROUNDS=${2:-2}
target=${CARGO_TARGET_DIR:-target}
ensure_turbojpeg_installed
cargo build --release --locked --example render --bin upcommit
sharp_dir="$HOME/.cache/upcommit/sharp-0.35.6"
if [ ! -d "$sharp_dir/node_modules/sharp" ]; then
  log "installing sharp 0.35.6 from npm into $sharp_dir"
  mkdir -p "$sharp_dir"
  (cd "$sharp_dir" && npm install --no-audit --no-fund --loglevel=error sharp@0.35.6)
fi
export NODE_PATH="$sharp_dir/node_modules"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
node bench/sharp_bench.js make "$dir"
inputs="noisy photo"
# sharp's own benchmark photo (2725 x 2225), where shared/ has it.
if [ -f ../shared/bench/2569067123_aca715a2ee_o.jpg ]; then
  cp ../shared/bench/2569067123_aca715a2ee_o.jpg "$dir/flickr.jpg"
  inputs="$inputs flickr"
fi
for input in $inputs; do
  log "$input.jpg: $(stat -c %s "$dir/$input.jpg") bytes"
  for threads in 1 2; do
    for round in $(seq "$ROUNDS"); do
      echo "{\"input\": \"$input\", \"round\": $round, \"result\": $(node bench/sharp_bench.js run "$dir/$input.jpg" "$threads" "$SECS" "$dir/$input-sharp.jpg")}"
      echo "{\"input\": \"$input\", \"round\": $round, \"result\": $("$target"/release/examples/render "$dir/$input.jpg" "$threads" "$SECS" "$dir/$input-upcommit.jpg")}"
      # The same renders through the render jail (issue 46): each in a worker process, as the
      # route renders them.
      echo "{\"input\": \"$input\", \"round\": $round, \"result\": $(UPCOMMIT_BENCH_JAILED="$target/release/upcommit" "$target"/release/examples/render "$dir/$input.jpg" "$threads" "$SECS")}"
    done
  done
done
venv="$HOME/.cache/upcommit/pillow-venv"
[ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q Pillow; }
"$venv/bin/python" - "$dir" <<'PY'
import sys
from PIL import Image, ImageChops, ImageStat
d = sys.argv[1]
import os
for name in [n for n in ("noisy", "photo", "flickr") if os.path.exists(f"{d}/{n}-sharp.jpg")]:
    a, b = Image.open(f"{d}/{name}-upcommit.jpg"), Image.open(f"{d}/{name}-sharp.jpg")
    assert a.size == b.size == (720, 588), (a.size, b.size)
    ma, mb = ImageStat.Stat(a).mean, ImageStat.Stat(b).mean
    diff = ImageStat.Stat(ImageChops.difference(a.convert("RGB"), b.convert("RGB"))).mean
    print(f'{{"input": "{name}", "mean_rgb_upcommit": {[round(v, 2) for v in ma]}, "mean_rgb_sharp": {[round(v, 2) for v in mb]}, "mean_abs_difference": {[round(v, 2) for v in diff]}}}')
PY
