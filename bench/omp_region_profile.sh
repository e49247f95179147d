#!/usr/bin/env bash
# Where a multi-thread CPU run's time goes, region by region: runs COMMAND with an LD_PRELOAD
# shim around libgomp's GOMP_parallel (bench/omp_regions/region_shim.c, built here with cc) and
# prints, per function that opens an OpenMP region, per step: wall, CPU of all threads, the
# serial gap before it, and the wait and imbalance inside it (bench/omp_regions/report.py).
#
#   SKIP=600 STEPS=10 bench/omp_region_profile.sh OUT_DIR build/sublet bench step --device cpu \
#       --model resnet20 --input 1x28x28 --batch-size 128 --steps 10 --warmup 3
#
# SKIP: region calls not recorded (the warm-up; a ResNet-20 CPU step opens about 190 regions, its
# start-up about 5). STEPS: what the totals are divided by. OUT_DIR gets the shim, the records
# (regions.txt) and the table (regions_table.txt). The binary must be the first word of COMMAND.
# OMP_WAIT_POLICY=passive makes a waiting thread sleep, so its CPU time is its work alone.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: [SKIP=N] [STEPS=N] $0 OUT_DIR BINARY [ARGS...]" >&2; exit 1; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$1"; shift
mkdir -p "$out"
cc -O2 -shared -fPIC -fopenmp -o "$out/region_shim.so" "$here/omp_regions/region_shim.c" -ldl
REGION_PROFILE_OUT="$out/regions.txt" REGION_PROFILE_SKIP="${SKIP:-0}" LD_PRELOAD="$out/region_shim.so" "$@"
python3 "$here/omp_regions/report.py" "$out/regions.txt" "$1" "${STEPS:-1}" | tee "$out/regions_table.txt"
