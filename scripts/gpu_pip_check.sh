#!/usr/bin/env bash
# The Python package with a real PyTorch (2.x with CUDA) on a GPU machine:
#   scripts/gpu_pip_check.sh WHEEL OUT_DIR
# WHEEL is built where the CUDA toolkit and cmake are (no GPU needed):
#   python3 -m venv --system-site-packages /tmp/w && /tmp/w/bin/pip wheel --no-build-isolation --no-deps ./python -w .gpu/wheel
# Here it is installed into OUT_DIR/site (pip when the python3 has it, else unpacked with Python's
# zipfile: a wheel is a zip of the installed files), the torch hooks are built against this PyTorch
# (python -m sublet_torch.build_hooks), and tests/torch_allocator/gpu_check_torch.py runs twice, with
# PyTorch's plain pluggable allocator and with the hooks. Assumes what scripts/gpu_checks.sh does: the
# python3 first on PATH has torch, a C++ compiler and the CUDA toolkit's headers (for the hooks).
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 WHEEL OUT_DIR" >&2; exit 2; }
wheel="$(realpath "$1")"; out="$(mkdir -p "$2" && cd "$2" && pwd)"; repo="$(cd "$(dirname "$0")/.." && pwd)"
[ -f "$wheel" ] || { echo "gpu_pip_check: no wheel $wheel" >&2; exit 2; }
site="$out/site"; rm -rf "$site"
if python3 -m pip --version >/dev/null 2>&1; then
  python3 -m pip install --no-deps --no-index --target "$site" "$wheel" > "$out/install.log" 2>&1
else
  python3 -m zipfile -e "$wheel" "$site" > "$out/install.log" 2>&1
fi
echo "gpu_pip_check: install rc=$? ($(head -c 300 "$out/install.log" | tail -2))"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" OUT="$out"
unset SUBLET_TORCH_ALLOCATOR_LIBRARY SUBLET_TORCH_HOOKS SUBLET_TORCH_SIMULATE
cd "$out"  # never the checkout's python/ by accident
python3 -c "import sublet_torch, torch; print('gpu_pip_check: sublet_torch', sublet_torch.__version__, 'from', sublet_torch.__file__, '| CUDA backend:', sublet_torch.cuda_built(), '| torch', torch.__version__, torch.version.cuda)"
python3 -m sublet_torch.build_hooks --verbose > "$out/build_hooks.log" 2>&1
echo "gpu_pip_check: build_hooks rc=$?"; tail -3 "$out/build_hooks.log"
status=0
for mode in plain hooks; do
  python3 "$repo/tests/torch_allocator/gpu_check_torch.py" --$mode > "$out/gpu_check_$mode.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || status=1
  echo "gpu_pip_check: $mode rc=$rc"; grep -E "FAILED|all checks passed|Error|error" "$out/gpu_check_$mode.log" | head -8
done
exit $status
