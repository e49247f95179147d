#!/usr/bin/env bash
# Runs every test binary packed into .gpu/tests (scripts/pack_gpu_run.sh) on the GPU machine with
# SUBLET_REQUIRE_GPU=1 (a skip is a failure there), one log per binary under $OUT/r, a summary
# line per binary and the failures on stdout, and everything as $OUT/r.tar.gz.
# JOBS=N runs N binaries at once; a binary that fails beside others runs again alone (log
# NAME.alone.log), so contention for the one GPU is told apart from a real failure.
R=$OUT/r; mkdir -p $R; export SUBLET_REQUIRE_GPU=1 R
one() {  # binary [log suffix]
  local name; name=$(basename "$1")
  timeout 240 "$1" > "$R/$name$2.log" 2>&1
  echo "$name$2 rc=$? $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+ test' "$R/$name$2.log" | tr '\n' ' ')"
}
export -f one
ls .gpu/tests/* | xargs -P "${JOBS:-1}" -I{} bash -c 'one {}' | sort > $R/summary.txt
cat $R/summary.txt
if [ "${JOBS:-1}" -gt 1 ]; then
  for name in $(awk '$2 != "rc=0" {print $1}' $R/summary.txt); do one ".gpu/tests/$name" .alone; done
fi
grep -h -E "^\[  FAILED|Failure|error|Error" $R/*.log | head -40
tar czf $OUT/r.tar.gz -C $OUT r
