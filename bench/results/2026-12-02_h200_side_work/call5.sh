#!/usr/bin/env bash
# Session 13 call 5: main cd614b6. The three test binaries changed since call 4 (gradient sum with
# a channels-last incoming gradient; the update waiting for slow side work), and that update test
# built with the update lane not waiting for pending side work (must fail).
set -u
tar -xJf .gpux/s13pack5.tar.xz
R=$OUT/t; mkdir -p $R
for t in .gpu/tests/*; do
  SUBLET_REQUIRE_GPU=1 timeout 100 $t > $R/$(basename $t).log 2>&1
  echo "$(basename $t) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/$(basename $t).log | tr '\n' ' ')"
done > $OUT/tests_summary.txt
SUBLET_REQUIRE_GPU=1 timeout 100 .gpu/broken_update_lane_no_wait2 > $R/broken_update_lane_no_wait.log 2>&1
echo "BROKEN update lane not waiting (should fail) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/broken_update_lane_no_wait.log | tr '\n' ' ')" >> $OUT/tests_summary.txt
cat $OUT/tests_summary.txt
grep -h -B2 -A6 "Failure" $R/*.log | head -30
