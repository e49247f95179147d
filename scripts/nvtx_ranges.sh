#!/usr/bin/env bash
# sublet's --nvtx ranges without Nsight Systems (for GPU machines with only ncu): `sublet bench
# step --nvtx` under libsublet_nvtx_capture.so (profile/nvtx_capture), then the per-range table of
# the timed steps in the layout of `nsys stats --report nvtx_sum`.
#   scripts/nvtx_ranges.sh BUILD_DIR OUT_DIR [bench step flags]
#     (default flags: --device cuda --model resnet20 --steps 5 --warmup 2)
# BUILD_DIR holds sublet and libsublet_nvtx_capture.so (a CUDA build, or the folder
# scripts/pack_gpu_run.sh makes). Writes to OUT_DIR: nvtx_ranges.json (every range), nvtx_sum.txt
# and nvtx_sum.json (the table), bench_step.log. On the GPU a range's time is the host's (launching
# its kernels), so with --device cuda a second run under CUDA_LAUNCH_BLOCKING=1, where each launch
# waits for its kernel, gives each layer's time with its kernels: nvtx_*_blocking.* (its step is
# slower, nothing overlaps). Eager steps only: with --cuda-graph the replays run no host code, so
# no ranges. Needs python3.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,13p "$0" >&2; exit 2; }
build="$(cd "$1" && pwd)"; out="$2"; shift 2
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--device cuda --model resnet20 --steps 5 --warmup 2)
here="$(cd "$(dirname "$0")/.." && pwd)"
library="$build/libsublet_nvtx_capture.so"
[ -x "$build/sublet" ] || { echo "nvtx_ranges: no sublet in $build" >&2; exit 1; }
[ -f "$library" ] || { echo "nvtx_ranges: no libsublet_nvtx_capture.so in $build (a CUDA build makes it)" >&2; exit 1; }
warmup=3  # bench step's default
for ((i = 0; i < ${#flags[@]}; ++i)); do
  case "${flags[$i]}" in
    --warmup) warmup="${flags[$((i + 1))]}" ;;
    --warmup=*) warmup="${flags[$i]#--warmup=}" ;;
  esac
done
mkdir -p "$out"

capture() {  # capture SUFFIX [VAR=VALUE...]: one bench step run and its table
  local suffix="$1"; shift
  rm -f "$out/nvtx_ranges$suffix.json"
  env "$@" NVTX_INJECTION64_PATH="$library" SUBLET_NVTX_CAPTURE="$out/nvtx_ranges$suffix.json" \
    "$build/sublet" bench step "${flags[@]}" --nvtx > "$out/bench_step$suffix.log" 2>&1 ||
    { echo "nvtx_ranges: sublet bench step failed ($out/bench_step$suffix.log):" >&2; tail -5 "$out/bench_step$suffix.log" >&2; return 1; }
  "${PYTHON:-python3}" "$here/profile/nvtx_capture/nvtx_sum.py" "$out/nvtx_ranges$suffix.json" --skip-steps "$warmup" \
    --json "$out/nvtx_sum$suffix.json" > "$out/nvtx_sum$suffix.txt"
  echo "== ${*:+$* }sublet bench step ${flags[*]} --nvtx (timed steps only: $warmup warm-up left out)"
  grep -E "^[a-z0-9]+ +(cpu|cuda)" "$out/bench_step$suffix.log" || true
  head -25 "$out/nvtx_sum$suffix.txt"; tail -1 "$out/nvtx_sum$suffix.txt"
}

capture ""
if [[ " ${flags[*]} " == *" --device cuda "* || " ${flags[*]} " == *" --device=cuda "* ]]; then
  capture _blocking CUDA_LAUNCH_BLOCKING=1 || echo "nvtx_ranges: the CUDA_LAUNCH_BLOCKING=1 run failed; the table above stands" >&2
fi
