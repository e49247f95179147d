#!/usr/bin/env bash
# The sanitizer runs CI does after the normal suite:
#   1. the allocator stress program (8 threads x 1M operations) under ThreadSanitizer;
#   2. the CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer.
# Each uses its own CPU-only build folder (build-tsan, build-asan). Usage: scripts/sanitize.sh [tsan|asan|all]
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
jobs="$(nproc)"

if [ "$what" = tsan ] || [ "$what" = all ]; then
  cmake -S . -B build-tsan -G Ninja -DSUBLET_WITH_CUDA=OFF -DSUBLET_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build build-tsan -j "$jobs" --target allocator_stress
  TSAN_OPTIONS="halt_on_error=1" build-tsan/tests/allocator_stress 8 1000000
fi

if [ "$what" = asan ] || [ "$what" = all ]; then
  cmake -S . -B build-asan -G Ninja -DSUBLET_WITH_CUDA=OFF -DSUBLET_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build build-asan -j "$jobs"
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir build-asan -L cpu -LE slow --output-on-failure
fi
