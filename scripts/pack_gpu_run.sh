#!/usr/bin/env bash
# Packs what a run on the GPU machine needs into one small folder (default .gpu/, ignored by git
# through .git/info/exclude): the sublet binary and every test binary, stripped. A whole build
# folder is too large to send (the device tool carries at most 64 MiB); these are a few MiB each.
#   scripts/pack_gpu_run.sh [BUILD_DIR] [OUT_DIR]
# There, run e.g. `scripts/gpu_checks.sh .gpu OUT tests bench` (it looks for OUT_DIR/sublet and
# OUT_DIR/tests/test_*).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out="${2:-.gpu}"
grep -qxF "/$out/" .git/info/exclude 2>/dev/null || echo "/$out/" >> .git/info/exclude
rm -rf "$out"
mkdir -p "$out/tests"
strip -o "$out/sublet" "$build/sublet"
find "$build/tests" -maxdepth 3 -type f -perm -u+x -name 'test_*' | while read -r t; do
  strip -o "$out/tests/$(basename "$t")" "$t"
done
for t in allocator_stress; do [ -x "$build/tests/$t" ] && strip -o "$out/tests/$t" "$build/tests/$t"; done
du -sh "$out"
