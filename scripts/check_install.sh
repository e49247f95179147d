#!/usr/bin/env bash
# Installs a built sublet into a temporary prefix, builds examples/find_package_consumer against it
# (find_package(sublet), sublet::sublet, <sublet/...> includes) and runs it: one training step and
# memory_summary(). Fails unless the consumer configures, builds, runs, and prints the memory
# summary; also runs the installed CLI once. Then builds examples/add_subdirectory_consumer, which
# builds sublet's CPU libraries as its subproject (-DSUBLET_WITH_CUDA=OFF), runs it, and fails if
# any file of that build got sublet's -Wall or -march. Usage: scripts/check_install.sh [BUILD_DIR]
# (default: build, which must hold the libraries and the sublet binary, e.g. after
# scripts/build.sh). SUBLET_CHECK_SUBPROJECT=0 skips the subproject build (it compiles the CPU
# libraries again).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  echo "check_install: $build_dir is not a configured build folder (no CMakeCache.txt)" >&2
  exit 1
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/sublet-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }
echo "check_install: installed $(grep -c 'Installing:' "$work/install.log") files into a temporary prefix"
"$prefix/bin/sublet" --help >/dev/null

# The consumer uses the build's compiler, and nvcc's folder for the toolkit as the build did.
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
compiler="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
cmake -S examples/find_package_consumer -B "$work/consumer" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" ${compiler:+-DCMAKE_CXX_COMPILER="$compiler"} >"$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
grep 'sublet .* from ' "$work/configure.log" | sed 's/^-- /check_install: /'
cmake --build "$work/consumer" -j "$(nproc)" >"$work/build.log" || { cat "$work/build.log"; exit 1; }

"$work/consumer/find_package_consumer" | tee "$work/run.log"
for expected in "one training step of resnet20: loss" "sublet memory summary, device" "Allocated memory"; do
  if ! grep -q "$expected" "$work/run.log"; then
    echo "check_install: FAILED, the consumer's output lacks '$expected'" >&2
    exit 1
  fi
done
echo "check_install: OK, the consumer built against the installed package and printed the memory summary"

[ "${SUBLET_CHECK_SUBPROJECT:-1}" = 0 ] && exit 0
# sublet as a subproject: its CPU libraries built inside another project's build.
cmake -S examples/add_subdirectory_consumer -B "$work/subproject" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DSUBLET_WITH_CUDA=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON ${compiler:+-DCMAKE_CXX_COMPILER="$compiler"} \
  >"$work/subproject-configure.log" || { cat "$work/subproject-configure.log"; exit 1; }
cmake --build "$work/subproject" -j "$(nproc)" >"$work/subproject-build.log" || { tail -50 "$work/subproject-build.log"; exit 1; }
"$work/subproject/add_subdirectory_consumer" | tee "$work/subproject-run.log"
if ! grep -q "sublet as a subproject: cross-entropy" "$work/subproject-run.log"; then
  echo "check_install: FAILED, the subproject consumer did not report its training" >&2
  exit 1
fi
# The including project keeps its own flags: no file compiled there has sublet's warnings or -march.
if grep -E -- '-Wall|-Wextra|-march=' "$work/subproject/compile_commands.json" | head -3 | grep -q .; then
  echo "check_install: FAILED, sublet added its flags to a project that includes it:" >&2
  grep -E -o -- '"file": "[^"]*"|-Wall|-march=[^ ]*' "$work/subproject/compile_commands.json" | head -6 >&2
  exit 1
fi
echo "check_install: OK, sublet built as a subproject ($(grep -c '"file"' "$work/subproject/compile_commands.json") files, none with sublet's flags) and the consumer trained"
