#!/usr/bin/env bash
# Builds sublet with clang, AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer coverage
# into build-asan (CPU only): one build serves both the sanitized test suite and the fuzz
# targets (scripts/sanitize.sh asan, scripts/fuzz.sh). Installs clang-14 and its OpenMP runtime
# from Debian when missing. Extra arguments are build targets (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v clang++-14 >/dev/null || need+=(clang-14)
dpkg-query -W -f='${Status}' libomp-14-dev 2>/dev/null | grep -q "install ok installed" || need+=(libomp-14-dev)
command -v ld.lld >/dev/null || need+=(lld)   # the linker CMake picks when present (SUBLET_LINKER=auto)
if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=(); [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq && "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
mkdir -p build-asan
# A build-asan configured earlier with another compiler would keep it: start that one afresh.
if [ -f build-asan/CMakeCache.txt ] && ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++-14" build-asan/CMakeCache.txt; then
  rm -rf build-asan/CMakeCache.txt build-asan/CMakeFiles
fi
# -gline-tables-only instead of RelWithDebInfo's full -g: sanitizer reports keep file:line in every
# frame (all they use), and the objects are much smaller, so links are faster.
# -O1 for the test programs' own files (SUBLET_TEST_CXX_FLAGS): they compile faster; the libraries,
# where the suite's time goes, stay at -O2.
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -G Ninja -DSUBLET_WITH_CUDA=OFF -DSUBLET_FUZZ=ON \
  -DSUBLET_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" -DSUBLET_TEST_CXX_FLAGS=-O1 > build-asan/configure.log
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build-asan -j "$(nproc)" "${targets[@]}"
