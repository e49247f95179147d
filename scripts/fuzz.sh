#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (+ AddressSanitizer/UBSan) into build-fuzz and runs each
# one. Usage: scripts/fuzz.sh [RUNS]   (default 20000 executions per target: the CI smoke run;
# pass e.g. 10000000 for a long run). New crash inputs land in build-fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20000}"
need=()
command -v clang++-14 >/dev/null || need+=(clang-14)
dpkg-query -W -f='${Status}' libomp-14-dev 2>/dev/null | grep -q "install ok installed" || need+=(libomp-14-dev)
if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=(); [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq && "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DSUBLET_WITH_CUDA=OFF -DSUBLET_BUILD_TESTS=OFF \
  -DSUBLET_FUZZ=ON -DSUBLET_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo
targets=(fuzz_alloc_conf fuzz_idx_reader fuzz_cifar10_reader fuzz_safetensors_reader)
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
mkdir -p build-fuzz/crashes
for t in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$t"
  mkdir -p "$corpus"
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  echo "== $t: $runs runs"
  status=0
  ASAN_OPTIONS=detect_leaks=1 build-fuzz/fuzz/"$t" -runs="$runs" -max_len=8192 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/crashes/"$t"- "$corpus" > build-fuzz/"$t".log 2>&1 || status=$?
  grep -E "stat::number_of_executed_units|ERROR|Done" build-fuzz/"$t".log || true
  if [ "$status" -ne 0 ]; then tail -40 build-fuzz/"$t".log; exit "$status"; fi
done
