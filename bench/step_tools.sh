# Sourced by the CPU step comparisons (bench/compare_step.sh, bench/cpu_step_compare.sh): sets
# `sublet` (SUBLET, default build/sublet) and `python` (PYTHON, default the first of python3,
# /usr/bin/python3 that imports torch), or exits with an error naming the variable to set.
# Needs `here` (the bench folder).
sublet="${SUBLET:-$here/../build/sublet}"
[[ -x "$sublet" ]] || { echo "error: $sublet is not an executable (set SUBLET=path/to/sublet)" >&2; exit 1; }
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c "import torch" 2>/dev/null; then python="$candidate"; break; fi
  done
fi
[[ -n "$python" ]] || { echo "error: no python3 with torch found (set PYTHON=...)" >&2; exit 1; }
