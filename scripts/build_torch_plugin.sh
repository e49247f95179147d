#!/usr/bin/env bash
# Builds the torch plugin of `sublet bench alloc` (bench/alloc/torch_plugin.h) with plain c++, no
# CMake, against the PyTorch of the python3 on PATH, and without rebuilding sublet:
#   scripts/build_torch_plugin.sh [OUTPUT.so]        (default: build/libsublet_torch_bench.so)
#   build/sublet bench alloc --device cuda --torch-plugin OUTPUT.so
# With --dlpack first, it builds the DLPack round-trip plugin of test_dlpack_torch instead
# (tests/runtime/io/torch_dlpack_plugin.cpp; default output build/libsublet_torch_dlpack.so):
#   scripts/build_torch_plugin.sh --dlpack OUTPUT.so
#   SUBLET_TORCH_DLPACK_PLUGIN=OUTPUT.so build/tests/test_dlpack_torch
# CUDA: when torch.version.cuda is set and a CUDA toolkit's headers are found ($CUDA_HOME, the
# nvcc on PATH, /usr/local/cuda), the plugin also gets PyTorch's CUDA caching allocator; the
# c10/cuda headers need cuda_runtime_api.h. TORCH_PLUGIN_CPU_ONLY=1 builds the CPU half only.
# Environment: PYTHON (default python3), CXX (default c++), CUDA_HOME, TORCH_PLUGIN_CPU_ONLY,
# VERBOSE=1 (print the compiler commands).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
plugin=bench
if [ "${1:-}" = --dlpack ]; then plugin=dlpack; shift; fi
if [ "$plugin" = dlpack ]; then
  output="${1:-$repo/build/libsublet_torch_dlpack.so}"
else
  output="${1:-$repo/build/libsublet_torch_bench.so}"
fi
python="${PYTHON:-python3}"
cxx="${CXX:-c++}"

die() { echo "build_torch_plugin: $*" >&2; exit 1; }

command -v "$python" >/dev/null || die "no $python on PATH (set PYTHON to the interpreter whose torch to use)"
command -v "$cxx" >/dev/null || die "no C++ compiler '$cxx' (set CXX)"

# A CUDA toolkit's headers: the directory holding cuda_runtime_api.h.
cuda_home=""
cuda_include=""
for home in "${CUDA_HOME:-}" "${CUDA_PATH:-}" "$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /none/bin/nvcc)")")" /usr/local/cuda; do
  if [ -n "$home" ] && [ -f "$home/include/cuda_runtime_api.h" ]; then cuda_home="$home"; cuda_include="$home/include"; break; fi
done

# What torch says about itself, one KEY=VALUE per line. cpp_extension's CUDA include paths need
# CUDA_HOME; without setuptools (cpp_extension imports it) the paths are torch's own layout.
query=$(CUDA_HOME="$cuda_home" "$python" - <<'EOF'
import os, sys
try:
    import torch
except Exception as e:  # ImportError, or a torch that fails to import
    print(f"ERROR=cannot import torch with {sys.executable}: {e}")
    sys.exit(0)
cuda = torch.version.cuda or ""
want_cuda = bool(cuda) and os.environ.get("CUDA_HOME") and os.environ.get("TORCH_PLUGIN_CPU_ONLY", "") not in ("1", "true")
def paths(kind):
    try:
        from torch.utils import cpp_extension
        fn = getattr(cpp_extension, kind)
        if want_cuda:
            try:
                return fn(device_type="cuda")  # PyTorch >= 2.6
            except TypeError:
                return fn(cuda=True)           # older
        return fn()
    except Exception as e:
        print(f"NOTE=torch.utils.cpp_extension.{kind}() failed ({type(e).__name__}: {e}); using torch's own layout", file=sys.stderr)
        root = os.path.dirname(torch.__file__)
        if kind == "include_paths":
            return [os.path.join(root, "include"), os.path.join(root, "include", "torch", "csrc", "api", "include")]
        return [os.path.join(root, "lib")]
print("VERSION=" + torch.__version__)
print("CUDA=" + cuda)
print("ABI=" + str(int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))))
print("INCLUDES=" + os.pathsep.join(paths("include_paths")))
print("LIBS=" + os.pathsep.join(paths("library_paths")))
print("TORCH_LIB=" + os.path.join(os.path.dirname(torch.__file__), "lib"))
EOF
) || die "$python failed while asking torch for its paths"
value() { sed -n "s/^$1=//p" <<<"$query" | head -1; }
[ -z "$(value ERROR)" ] || die "$(value ERROR) (put the python3 whose torch to use first on PATH, or set PYTHON)"
version=$(value VERSION); torch_cuda=$(value CUDA); abi=$(value ABI)
IFS=: read -r -a includes <<<"$(value INCLUDES)"
IFS=: read -r -a libdirs <<<"$(value LIBS)"
torch_lib=$(value TORCH_LIB)
[ -n "$version" ] || die "could not read torch's version from $python"
[ -f "$torch_lib/libc10.so" ] || die "torch $version: no libc10.so in $torch_lib (a torch without its C++ libraries?)"

with_cuda=0
if [ -n "$torch_cuda" ] && [ "${TORCH_PLUGIN_CPU_ONLY:-}" != 1 ]; then
  [ -n "$cuda_include" ] || die "torch $version has CUDA $torch_cuda, but no CUDA toolkit headers (cuda_runtime_api.h) were found in \$CUDA_HOME, next to nvcc or in /usr/local/cuda; set CUDA_HOME, or TORCH_PLUGIN_CPU_ONLY=1 for the CPU half only"
  [ -f "$torch_lib/libc10_cuda.so" ] || die "torch $version has CUDA $torch_cuda but no libc10_cuda.so in $torch_lib"
  with_cuda=1
fi

sources=("$repo/bench/alloc/torch_plugin.cpp" "$repo/bench/alloc/torch_tensors.cpp")
[ "$plugin" = dlpack ] && sources=("$repo/tests/runtime/io/torch_dlpack_plugin.cpp")
defines=("-D_GLIBCXX_USE_CXX11_ABI=$abi")
# --no-as-needed: the plugin calls nothing in libtorch_cuda directly, but at::empty on a CUDA
# device needs the kernels it registers when loaded (LibTorch's CMake config does the same).
libs=(-Wl,--no-as-needed -lc10 -ltorch_cpu)
if [ "$with_cuda" = 1 ]; then
  [ "$plugin" = bench ] && sources+=("$repo/bench/alloc/torch_allocator.cpp")
  defines+=(-DSUBLET_TORCH_PLUGIN_WITH_CUDA=1)
  case " ${includes[*]} " in *" $cuda_include "*) ;; *) includes+=("$cuda_include") ;; esac
  libs+=(-lc10_cuda -ltorch_cuda)
fi
libs+=(-Wl,--as-needed)
if [ "$with_cuda" = 1 ]; then
  # Only if an inline c10/cuda function calls the CUDA runtime itself (--as-needed drops it
  # otherwise); its soname is the one libtorch_cuda already loaded, so one runtime serves both.
  for d in "$cuda_home/lib64" "$cuda_home/lib"; do [ -f "$d/libcudart.so" ] && { libs+=("-L$d" -lcudart); break; }; done
fi
include_flags=()
for d in "${includes[@]}"; do [ -n "$d" ] && include_flags+=(-isystem "$d"); done
lib_flags=()
for d in "${libdirs[@]}"; do [ -n "$d" ] && lib_flags+=("-L$d" "-Wl,-rpath,$d"); done

echo "build_torch_plugin: torch $version from $python ($(command -v "$python")), _GLIBCXX_USE_CXX11_ABI=$abi"
if [ "$with_cuda" = 1 ]; then
  echo "build_torch_plugin: CUDA $torch_cuda: CPU and CUDA columns (toolkit headers in $cuda_include)"
elif [ -n "$torch_cuda" ]; then
  echo "build_torch_plugin: CUDA $torch_cuda left out (TORCH_PLUGIN_CPU_ONLY=1): CPU column only"
else
  echo "build_torch_plugin: this torch has no CUDA: CPU column only"
fi
echo "build_torch_plugin: headers ${includes[*]}"
echo "build_torch_plugin: libraries ${libdirs[*]} (rpath)"

mkdir -p "$(dirname "$output")"
objects_dir=$(mktemp -d)
trap 'rm -rf "$objects_dir"' EXIT
# -fvisibility=hidden: only the entry point is exported. One compiler per source, in parallel.
cxxflags=(-std=c++17 -O2 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -DNDEBUG -Wall "${defines[@]}"
          -I"$repo" "${include_flags[@]}")
run() { [ "${VERBOSE:-}" = 1 ] && echo "+ $*"; "$@"; }
pids=()
for src in "${sources[@]}"; do
  run "$cxx" "${cxxflags[@]}" -c "$src" -o "$objects_dir/$(basename "$src" .cpp).o" & pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || die "compiling failed (see above)"; done
# -z defs: a symbol none of these libraries has fails here, not at dlopen on the benchmark machine.
run "$cxx" -shared -fPIC -o "$output" "$objects_dir"/*.o "${lib_flags[@]}" -Wl,-z,defs "${libs[@]}" \
  || die "linking failed (see above)"
echo "build_torch_plugin: wrote $output"
if [ "$plugin" = dlpack ]; then
  echo "build_torch_plugin: use it with: SUBLET_TORCH_DLPACK_PLUGIN=$output test_dlpack_torch"
  exit 0
fi
echo "build_torch_plugin: use it with: sublet bench alloc --device $([ "$with_cuda" = 1 ] && echo cuda || echo cpu) --torch-plugin $output"
