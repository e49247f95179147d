#!/usr/bin/env bash
# Runs each libFuzzer target (built by scripts/clang_sanitized_build.sh into build-asan, with
# AddressSanitizer/UBSan) for RUNS executions, starting from its seed corpus in fuzz/corpus.
# Usage: scripts/fuzz.sh [RUNS] [TARGET...]   (default 20000 executions: the CI smoke run;
# pass e.g. 10000000 for a long run). New crash inputs land in build-asan/crashes/: make each a
# test. Exits non-zero on the first target that crashes, leaks or trips a sanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20000}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_alloc_conf fuzz_alloc_trace fuzz_pickle_reader fuzz_idx_reader fuzz_cifar10_reader fuzz_safetensors_reader fuzz_store_protocol fuzz_token_file fuzz_text_corpus fuzz_gpt2_vocab)
scripts/clang_sanitized_build.sh "${targets[@]}"
mkdir -p build-asan/crashes
for t in "${targets[@]}"; do
  corpus="build-asan/corpus/$t"
  mkdir -p "$corpus"
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  echo "== $t: $runs runs"
  status=0
  ASAN_OPTIONS=detect_leaks=1 build-asan/fuzz/"$t" -runs="$runs" -max_len=8192 -print_final_stats=1 \
    -artifact_prefix=build-asan/crashes/"$t"- "$corpus" > build-asan/"$t".log 2>&1 || status=$?
  grep -E "stat::number_of_executed_units|ERROR|Done" build-asan/"$t".log || true
  if [ "$status" -ne 0 ]; then tail -40 build-asan/"$t".log; exit "$status"; fi
done
