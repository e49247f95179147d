#!/usr/bin/env bash
# Runs `sublet bench step` and bench/pytorch_step.py with the same arguments and prints them side
# by side with the ratio sublet / PyTorch (below 1: sublet is faster or uses less).
#
#   bench/compare_step.sh --device cpu --model resnet20 --input 1x28x28 --batch-size 128
#
# SUBLET: the sublet binary (default build/sublet). PYTHON: a Python with torch (default: the
# first of python3, /usr/bin/python3 that imports it). OUT: where both JSON files go (default: a
# temporary folder). Both runs see the same environment (OMP_NUM_THREADS, OMP_WAIT_POLICY, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/step_tools.sh"  # sets sublet and python
for arg in "$@"; do
  [[ "$arg" == --json* ]] && { echo "error: compare_step.sh writes the JSON itself (see OUT)" >&2; exit 1; }
done
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$sublet" bench step "$@" --json "$out/sublet.json"
"$python" "$here/pytorch_step.py" "$@" --json "$out/pytorch.json"
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"

"$python" - "$out/sublet.json" "$out/pytorch.json" <<'PY'
import json, sys

def load(path):
    data = json.load(open(path))
    return data if isinstance(data, list) else [data]

def mib(n):
    return "n/a" if n is None else f"{n / 2**20:.1f}"

def ms(n):
    return "n/a" if n is None else f"{n:.1f}"

def ratio(a, b):
    return "n/a" if a is None or b in (None, 0) else f"{a / b:.2f}"

sublet, torch = load(sys.argv[1]), load(sys.argv[2])
print()
print(f"{'model':<10} {'device':<7} {'batch':>5} {'input':>9} | {'sublet ms':>10} {'torch ms':>10} {'ratio':>6} |"
      f" {'sublet cpu':>10} {'torch cpu':>10} {'ratio':>6} | {'sublet MiB':>10} {'torch MiB':>10} {'ratio':>6}")
for s, t in zip(sublet, torch):
    print(f"{s['model']:<10} {s['device']:<7} {s['batch_size']:>5} {s['input']:>9} |"
          f" {s['ms_per_step']:>10.1f} {t['ms_per_step']:>10.1f} {ratio(s['ms_per_step'], t['ms_per_step']):>6} |"
          f" {ms(s.get('cpu_ms_per_step')):>10} {ms(t.get('cpu_ms_per_step')):>10}"
          f" {ratio(s.get('cpu_ms_per_step'), t.get('cpu_ms_per_step')):>6} |"
          f" {mib(s['peak_allocated_bytes']):>10} {mib(t['peak_allocated_bytes']):>10}"
          f" {ratio(s['peak_allocated_bytes'], t['peak_allocated_bytes']):>6}")
print(f"ratio = sublet / {torch[0]['framework']} (ms: median step wall time; cpu: median process CPU ms per step, "
      f"less sensitive to other jobs on the machine; MiB: peak allocated, n/a where PyTorch has no "
      f"CPU allocator statistics)")
PY
echo "JSON: $out/sublet.json $out/pytorch.json"
