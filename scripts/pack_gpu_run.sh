#!/usr/bin/env bash
# Packs what a run on the GPU machine needs into one small folder (default .gpu/, ignored by git
# through .git/info/exclude): the sublet binary and the named test binaries, stripped. A whole
# build folder is too large to send (the device tool carries at most 64 MiB), and so are all the
# test binaries together (each links the whole runtime statically: ~6 MiB): name at most ~8.
#   scripts/pack_gpu_run.sh BUILD_DIR OUT_DIR [TEST_NAME...]   (default tests: test_cuda_allocator)
# There, run e.g. `scripts/gpu_checks.sh .gpu OUT tests bench` (it looks for OUT_DIR/sublet and
# OUT_DIR/tests/test_*).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out="${2:-.gpu}"
exclude="$(git rev-parse --git-path info/exclude)"  # a worktree's .git is a file
mkdir -p "$(dirname "$exclude")"
grep -qxF "/$out/" "$exclude" 2>/dev/null || echo "/$out/" >> "$exclude"
rm -rf "$out"
mkdir -p "$out/tests"
strip -o "$out/sublet" "$build/sublet"
# The NVTX capture library (profile/nvtx_capture) where the build made it: scripts/nvtx_ranges.sh.
if [ -f "$build/libsublet_nvtx_capture.so" ]; then
  strip --strip-unneeded -o "$out/libsublet_nvtx_capture.so" "$build/libsublet_nvtx_capture.so"
fi
# The Gloo shim and the libraries it loads (`--backend gloo`; the GPU machine has no libgloo): next
# to the binary, where sublet looks for the shim and the shim's run path ($ORIGIN) finds the rest.
if [ -f "$build/libsublet_gloo.so" ]; then
  strip --strip-unneeded -o "$out/libsublet_gloo.so" "$build/libsublet_gloo.so"
  ldd "$build/libsublet_gloo.so" | awk '/(libgloo|libhiredis|libibverbs|libnl-3|libnl-route-3)\./ {print $3}' |
    while read -r lib; do cp -L "$lib" "$out/"; done
fi
shift 2 || true
for name in "${@:-test_cuda_allocator}"; do
  t=$(find "$build/tests" -maxdepth 3 -type f -perm -u+x -name "$name" | head -1)
  [ -n "$t" ] || { echo "pack_gpu_run: no test binary $name under $build/tests" >&2; exit 1; }
  strip -o "$out/tests/$name" "$t"
done
du -sh "$out"
