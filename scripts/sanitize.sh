#!/usr/bin/env bash
# The sanitizer runs CI does after the normal suite:
#   tsan: the allocator stress program (8 threads x 1M operations) under ThreadSanitizer (gcc,
#         build-tsan);
#   asan: the CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer, then a short run
#         of every fuzz target, from one clang build (build-asan, scripts/clang_sanitized_build.sh).
# Usage: scripts/sanitize.sh [tsan|asan|all]   (default all)
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
  scripts/clang_sanitized_build.sh
  # allocator_may_return_null: an impossible host allocation must fail as it does without ASan
  # (the CLI tests ask for 1 TiB and expect sublet's out-of-memory message).
  # TrainerMnist (two epochs of real training, the accuracy guard) is left out: under ASan it
  # takes 9 minutes, more than everything else together, and the plain suite has just run it.
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir build-asan -L cpu -E "^TrainerMnist\." -j "$jobs" --output-on-failure
  scripts/fuzz.sh 20000
fi
