"""Builds libsublet_torch_hooks.so against the PyTorch of this Python, with a C++ compiler:

    python -m sublet_torch.build_hooks [--output PATH] [--source torch_hooks.cpp]

The hooks make sublet's allocator a subclass of PyTorch's CUDAPluggableAllocator that answers what
the plain one refuses (cacheInfo for cuDNN's benchmark, torch.cuda.memory_stats() & co., empty_cache,
record_stream, memory fraction) and raises torch.OutOfMemoryError. They use PyTorch's C++ headers,
so they are built on the machine whose PyTorch loads them, for that PyTorch version: by default into
this package, where sublet_torch.use() finds them. The package's build does the same when PyTorch's
headers are there. Needs PyTorch >= 2.1 with CUDA and its headers, the CUDA toolkit's headers
($CUDA_HOME, the nvcc on PATH, or /usr/local/cuda) and a C++ compiler ($CXX, default c++).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HOOKS_NAME = "libsublet_torch_hooks.so"
SOURCE_NAME = "torch_hooks.cpp"
_HERE = os.path.dirname(os.path.abspath(__file__))


class HooksUnavailable(RuntimeError):
    """What the hooks need is missing here (no PyTorch, headers, CUDA headers or compiler)."""


def default_output():
    return os.path.join(_HERE, HOOKS_NAME)


def info_path(hooks_path):
    """The file beside the hooks that says which PyTorch they were built for."""
    return hooks_path + ".json"


def default_source():
    """torch_hooks.cpp shipped in the package, else the checkout's."""
    for path in (os.path.join(_HERE, "_src", SOURCE_NAME),
                 os.path.join(_HERE, "..", "..", "torch_allocator", SOURCE_NAME)):
        if os.path.isfile(path):
            return os.path.realpath(path)
    raise HooksUnavailable("no %s in %s/_src or in a sublet checkout around this package" % (SOURCE_NAME, _HERE))


def cuda_include():
    nvcc = shutil.which("nvcc")
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
             os.path.dirname(os.path.dirname(nvcc)) if nvcc else None, "/usr/local/cuda"]
    for home in homes:
        if home and os.path.isfile(os.path.join(home, "include", "cuda_runtime_api.h")):
            return os.path.join(home, "include")
    raise HooksUnavailable("no CUDA toolkit headers (cuda_runtime_api.h) in $CUDA_HOME, next to nvcc or in /usr/local/cuda")


def toolkit_version(include):
    """"13.0" from the toolkit's cuda_runtime_api.h (CUDART_VERSION 13000); None when unreadable."""
    try:
        with open(os.path.join(include, "cuda_runtime_api.h"), encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[:2] == ["#define", "CUDART_VERSION"] and parts[2].isdigit():
                    number = int(parts[2])
                    return "%d.%d" % (number // 1000, number % 1000 // 10)
    except OSError:
        pass
    return None


def torch_paths():
    """What the compile needs from this Python's torch; HooksUnavailable when it cannot serve."""
    try:
        import torch
    except Exception as e:  # ImportError, or a torch that fails to import
        raise HooksUnavailable("cannot import torch with %s: %s" % (sys.executable, e)) from None
    root = os.path.dirname(torch.__file__)
    includes = [os.path.join(root, "include"), os.path.join(root, "include", "torch", "csrc", "api", "include")]
    if not torch.version.cuda:
        raise HooksUnavailable("torch %s has no CUDA" % torch.__version__)
    if not os.path.isfile(os.path.join(includes[0], "torch", "csrc", "cuda", "CUDAPluggableAllocator.h")):
        raise HooksUnavailable("torch %s has no torch/csrc/cuda/CUDAPluggableAllocator.h (PyTorch >= 2.1 with its "
                               "headers is needed)" % torch.__version__)
    return {"version": torch.__version__, "cuda": torch.version.cuda, "includes": includes,
            "lib": os.path.join(root, "lib"), "abi": int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))}


def build(output=None, source=None, cxx=None, verbose=False):
    """Compiles the hooks into `output` (default: this package) and writes its .json beside it.
    Returns the output path; HooksUnavailable names what is missing, RuntimeError a failed compile."""
    output = os.path.abspath(output or default_output())
    source = source or default_source()
    cxx = cxx or os.environ.get("CXX") or "c++"
    if shutil.which(cxx) is None:
        raise HooksUnavailable("no C++ compiler '%s' (set CXX)" % cxx)
    torch = torch_paths()
    cuda = cuda_include()
    toolkit = toolkit_version(cuda)
    if toolkit and toolkit.split(".")[0] != torch["cuda"].split(".")[0]:
        # The hooks link the toolkit's libcudart: a second CUDA runtime beside PyTorch's.
        print("sublet_torch.build_hooks: warning: the CUDA toolkit in %s is %s, torch %s uses CUDA %s; a toolkit of "
              "PyTorch's CUDA major version is safer (set CUDA_HOME)" % (cuda, toolkit, torch["version"], torch["cuda"]))
    folder = os.path.dirname(output)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        pass  # said just below
    if not os.access(folder, os.W_OK):
        raise RuntimeError("cannot write to %s; pass --output to build the hooks elsewhere and "
                           "sublet_torch.use(torch_hooks=PATH)" % folder)
    flags = []
    for include in torch["includes"] + [cuda]:
        flags += ["-isystem", include]
    cuda_lib = os.path.join(os.path.dirname(cuda), "lib64")
    # -z defs: a missing symbol fails here, not at dlopen. PyTorch's headers inline CUDA runtime
    # calls: -lcudart from the toolkit, whose soname is the one torch has loaded already.
    command = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
               "-D_GLIBCXX_USE_CXX11_ABI=%d" % torch["abi"]] + flags + [
        source, "-o", output, "-L" + torch["lib"], "-Wl,-rpath," + torch["lib"], "-Wl,-z,defs",
        "-ltorch_cuda", "-lc10_cuda", "-lc10", "-ltorch_cpu", "-L" + cuda_lib, "-lcudart", "-ldl"]
    if verbose:
        print("+ " + " ".join(command))
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if result.returncode != 0:
        raise RuntimeError("compiling %s against torch %s failed:\n%s" % (source, torch["version"], result.stdout))
    with open(info_path(output), "w", encoding="utf-8") as f:
        json.dump({"torch": torch["version"], "torch_cuda": torch["cuda"], "toolkit": toolkit}, f)
    return output


def built_for(hooks_path):
    """The torch version the hooks at `hooks_path` were built for; None without their .json."""
    try:
        with open(info_path(hooks_path), encoding="utf-8") as f:
            return json.load(f).get("torch")
    except (OSError, ValueError):
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sublet_torch.build_hooks", description=__doc__.split("\n")[0])
    parser.add_argument("--output", help="where to write the hooks (default: %s)" % default_output())
    parser.add_argument("--source", help="torch_hooks.cpp (default: the package's copy)")
    parser.add_argument("--verbose", action="store_true", help="print the compiler command")
    args = parser.parse_args(argv)
    try:
        path = build(args.output, args.source, verbose=args.verbose)
    except (HooksUnavailable, RuntimeError) as e:
        print("sublet_torch.build_hooks: %s" % e, file=sys.stderr)
        return 1
    print("sublet_torch.build_hooks: wrote %s for torch %s" % (path, built_for(path)))
    if os.path.dirname(path) != _HERE:
        print("sublet_torch.build_hooks: use it with sublet_torch.use(torch_hooks=%r)" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
