#!/usr/bin/env bash
# Sets up (scripts/setup.sh), configures and builds sublet into build/ (or $SUBLET_BUILD_DIR).
# CUDA parts are built when a CUDA toolkit is found (nvcc on PATH or in /usr/local/cuda).
# Extra arguments go to CMake's configure step, e.g. scripts/build.sh -DSUBLET_WITH_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir="${SUBLET_BUILD_DIR:-build}"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build_dir" -j "$(nproc)"
