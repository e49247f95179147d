#!/usr/bin/env bash
# Builds libsublet_torch_allocator.so (torch_allocator/: sublet's caching allocator behind the C
# functions PyTorch's CUDAPluggableAllocator calls, plus statistics, summary and snapshot for
# python/sublet_torch) and copies it to OUT.so:
#   scripts/build_torch_allocator.sh [OUT.so]      (default: build-torch-allocator/libsublet_torch_allocator.so)
# It needs no PyTorch headers: the CMake target sublet_torch_allocator is built in its own build
# folder ($SUBLET_TORCH_BUILD_DIR, default build-torch-allocator) with the CUDA backend. The CUDA
# runtime is linked statically, so the library needs only the driver where it runs (a CUDA 13
# driver for a CUDA 13 toolkit), not a libcudart.so; its exports are the sublet_torch_* functions.
# When the python3 on PATH has torch, its version and CUDA are printed (nothing else is taken
# from it). Then:
#   PYTHONPATH=python python3 -c "import sublet_torch; sublet_torch.use(library='OUT.so')"
#
# The Python package (pip install --no-build-isolation ./python) builds the same library into itself.
#
# Optional, on the machine whose PyTorch will load it (needs PyTorch >= 2.1 with its headers, a C++
# compiler and the CUDA toolkit's headers; never part of the CMake build):
#   scripts/build_torch_allocator.sh --torch-hooks HOOKS.so
# compiles torch_allocator/torch_hooks.cpp against the torch of the python3 on PATH into
# libsublet_torch_hooks.so (python -m sublet_torch.build_hooks does it for an installed package);
# sublet_torch.use(torch_hooks=HOOKS.so) then installs a subclass of
# PyTorch's CUDAPluggableAllocator that answers cacheInfo (cuDNN's benchmark needs it),
# getDeviceStats and the peak resets (torch.cuda.memory_* work), record_stream, empty_cache and
# set_per_process_memory_fraction.
# Environment: SUBLET_TORCH_BUILD_DIR, CUDA_HOME (where nvcc is, else PATH or /usr/local/cuda),
# SUBLET_TORCH_CPU_ONLY=1 (no CUDA backend: simulated devices only, for tests), JOBS (default 2).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

die() { echo "build_torch_allocator: $*" >&2; exit 1; }

# The hooks are built by the Python package's own builder (python/sublet_torch/build_hooks.py),
# which pip install also runs when PyTorch's headers are there.
build_torch_hooks() {
  local output="$1" python="${PYTHON:-python3}"
  command -v "$python" >/dev/null || die "no $python on PATH (set PYTHON to the interpreter whose torch will load the hooks)"
  PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}" "$python" -m sublet_torch.build_hooks --output "$output" \
    --source "$repo/torch_allocator/torch_hooks.cpp" || die "building the torch hooks failed (see above)"
}

if [ "${1:-}" = "--torch-hooks" ]; then
  [ -n "${2:-}" ] || die "--torch-hooks needs the output path (HOOKS.so)"
  build_torch_hooks "$2"
  exit 0
fi
build="${SUBLET_TORCH_BUILD_DIR:-$repo/build-torch-allocator}"
output="${1:-$build/libsublet_torch_allocator.so}"
jobs="${JOBS:-2}"

command -v cmake >/dev/null || die "cmake is not on PATH"
command -v ninja >/dev/null && generator=(-G Ninja) || generator=()

cuda_flags=(-DSUBLET_WITH_CUDA=ON)
if [ "${SUBLET_TORCH_CPU_ONLY:-}" = 1 ]; then
  cuda_flags=(-DSUBLET_WITH_CUDA=OFF)
  echo "build_torch_allocator: SUBLET_TORCH_CPU_ONLY=1: no CUDA backend (simulated devices only; PyTorch cannot use this build)"
else
  nvcc=""
  for candidate in "${CUDA_HOME:+$CUDA_HOME/bin/nvcc}" "$(command -v nvcc 2>/dev/null || true)" /usr/local/cuda/bin/nvcc; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then nvcc="$candidate"; break; fi
  done
  [ -n "$nvcc" ] || die "no nvcc found (set CUDA_HOME or put the CUDA toolkit's bin on PATH; SUBLET_TORCH_CPU_ONLY=1 builds a library for tests only)"
  export PATH="$(dirname "$nvcc"):$PATH"
  cuda_flags+=(-DCMAKE_CUDA_COMPILER="$nvcc")
  echo "build_torch_allocator: CUDA $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') from $nvcc"
fi

if command -v python3 >/dev/null; then
  torch_info=$(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null || true)
  if [ -n "$torch_info" ]; then
    echo "build_torch_allocator: python3 has torch $torch_info (the library does not link it; any PyTorch >= 2.0 with CUDAPluggableAllocator loads it)"
  else
    echo "build_torch_allocator: python3 has no torch here; the library does not need it to build"
  fi
fi

mkdir -p "$build"
if [ ! -f "$build/CMakeCache.txt" ]; then
  nice cmake -S "$repo" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSUBLET_BUILD_TESTS=OFF "${cuda_flags[@]}" \
    >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; die "configuring $build failed (log above)"; }
fi
nice cmake --build "$build" -j "$jobs" --target sublet_torch_allocator || die "building the target sublet_torch_allocator failed"
built="$build/torch_allocator/libsublet_torch_allocator.so"
[ -f "$built" ] || die "the build did not produce $built"

if [ "${SUBLET_TORCH_CPU_ONLY:-}" != 1 ] && command -v python3 >/dev/null; then
  cuda_built=$(python3 -c 'import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).sublet_torch_cuda_built())' "$built" 2>/dev/null || echo "?")
  [ "$cuda_built" != 0 ] || die "$built was built without the CUDA backend ($build was configured without CUDA?); remove $build or set SUBLET_TORCH_BUILD_DIR to a new folder"
fi
# What the library needs where it runs: no libcudart.so, no libtorch.
needed=$(objdump -p "$built" 2>/dev/null | sed -n 's/^ *NEEDED *//p' | tr '\n' ' ')
case " $needed " in
  *" libcudart.so"*|*" libtorch"*|*" libc10"*) die "$built needs $needed; expected no CUDA runtime or PyTorch library" ;;
esac
mkdir -p "$(dirname "$output")"
[ "$(realpath "$built")" = "$(realpath -m "$output")" ] || cp "$built" "$output"
echo "build_torch_allocator: wrote $output (needs: $needed)"
echo "build_torch_allocator: exports $(nm -D --defined-only "$output" | grep -c ' T sublet_torch_') sublet_torch_* functions"
