#!/usr/bin/env bash
# Runs every test binary packed into .gpu/tests (scripts/pack_gpu_run.sh) on the GPU machine with
# SUBLET_REQUIRE_GPU=1 (a skip is a failure there), one log per binary under $OUT/r, a summary
# line per binary and the failures on stdout, and everything as $OUT/r.tar.gz.
R=$OUT/r; mkdir -p $R; export SUBLET_REQUIRE_GPU=1
for t in .gpu/tests/*; do timeout 240 $t > $R/$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/$(basename $t).log | tr '\n' ' ')"; done
grep -h -E "^\[  FAILED|Failure|error|Error" $R/*.log | head -40
tar czf $OUT/r.tar.gz -C $OUT r
