#!/usr/bin/env bash
# The encoders a rendition can be written with (issue 37: "AVIF if the encoder is fast enough to
# be useful — measure it"): sharp's benchmark inputs (bench/sharp_bench.js make: a noisy 2725 ×
# 2225 JPEG of 2.7 MB and a photo-like one) rendered to 720 × 588, then encoded for SECS seconds
# each by TurboJPEG, libwebp and libheif's AV1 encoder (bench/encoders.rs). One JSON line per
# input and encoder.
# Usage: bench/encoders.sh [SECS=4]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
SECS=${1:-4}
target=${CARGO_TARGET_DIR:-target}
ensure_turbojpeg_installed
cargo build --release --locked --example encoders
sharp_dir="$HOME/.cache/upcommit/sharp-0.35.6"
if [ ! -d "$sharp_dir/node_modules/sharp" ]; then
  log "installing sharp 0.35.6 from npm into $sharp_dir (it writes the inputs)"
  mkdir -p "$sharp_dir"
  (cd "$sharp_dir" && npm install --no-audit --no-fund --loglevel=error sharp@0.35.6)
fi
export NODE_PATH="$sharp_dir/node_modules"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
node bench/sharp_bench.js make "$dir"
for input in noisy photo; do
  "$target"/release/examples/encoders "$dir/$input.jpg" "$SECS" | while read -r line; do
    echo "{\"input\": \"$input\", \"result\": $line}"
  done
done
