"""The build of the sublet-torch package (metadata in pyproject.toml).

`pip install --no-build-isolation ./python` (or `python3 -m build --wheel --no-isolation python`)
runs CMake on the sublet checkout around this folder with SUBLET_ALLOCATOR_ONLY=ON: only core/,
memory/ and torch_allocator/ are configured, so no Eigen, CLI11 or cuDNN is needed. The library it
builds, libsublet_torch_allocator.so, goes into the package. With a CUDA toolkit found, the CUDA
allocator; without one, a library for simulated devices only. When the Python running the build
has PyTorch >= 2.1 with its headers and CUDA, the torch hooks are built into the package too.

Environment: SUBLET_TORCH_CUDA=0 (no CUDA backend) or 1 (fail without a CUDA toolkit); unset, CUDA
when found. CMAKE_BUILD_PARALLEL_LEVEL (compile jobs), SUBLET_TORCH_CMAKE_ARGS (more -D options),
SUBLET_TORCH_HOOKS=0 (never build the hooks).
"""
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Command, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: pip install still works, bdist_wheel does not
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = "libsublet_torch_allocator.so"
# What an sdist carries of the checkout (the CMake project the library is built from).
SOURCE_PARTS = ["CMakeLists.txt", "cmake", "core", "memory", "torch_allocator",
                "profile/pickle_writer.h", "profile/pickle_writer.cpp", "profile/memory_viz_layout.h"]


def _module(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "sublet_torch", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source_root():
    """The sublet checkout (an sdist carries a copy in _sublet_src)."""
    for root in (os.path.join(HERE, "_sublet_src"), os.path.dirname(HERE)):
        if os.path.isfile(os.path.join(root, "CMakeLists.txt")) and os.path.isdir(os.path.join(root, "torch_allocator")):
            return root
    sys.exit("sublet-torch: no sublet checkout around %s (python/ must stay inside the sublet source tree)" % HERE)


VERSION = _module("_cmake_version").read(os.path.join(source_root(), "CMakeLists.txt"))


class BuildLibrary(Command):
    """Configures and builds libsublet_torch_allocator.so with CMake."""
    description = "build libsublet_torch_allocator.so (CMake, SUBLET_ALLOCATOR_ONLY=ON)"
    user_options = []

    def initialize_options(self):
        self.build_temp = None

    def finalize_options(self):
        self.set_undefined_options("build", ("build_temp", "build_temp"))

    def run(self):
        cmake = shutil.which("cmake")
        if cmake is None:
            sys.exit("sublet-torch: cmake is not on PATH (Debian: apt-get install cmake)")
        build = os.path.abspath(os.path.join(self.build_temp, "sublet-allocator"))
        args = [cmake, "-S", source_root(), "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DSUBLET_ALLOCATOR_ONLY=ON",
                "-DSUBLET_BUILD_TESTS=OFF",
                # A library others load: the baseline x86-64 instruction set, not the project's x86-64-v3.
                "-DSUBLET_CPU_ARCH="]
        if shutil.which("ninja") and not os.path.isfile(os.path.join(build, "Makefile")):
            args += ["-G", "Ninja"]
        want_cuda = os.environ.get("SUBLET_TORCH_CUDA", "")
        if want_cuda == "0":
            args.append("-DSUBLET_WITH_CUDA=OFF")
        args += shlex.split(os.environ.get("SUBLET_TORCH_CMAKE_ARGS", ""))
        self.announce("sublet-torch: " + " ".join(args), level=2)
        subprocess.check_call(args)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
        subprocess.check_call([cmake, "--build", build, "--target", "sublet_torch_allocator", "-j", jobs])
        built = os.path.join(build, "torch_allocator", LIBRARY)
        if want_cuda == "1":
            import ctypes
            if not ctypes.CDLL(built).sublet_torch_cuda_built():
                sys.exit("sublet-torch: SUBLET_TORCH_CUDA=1 but CMake found no CUDA toolkit (set CUDAToolkit_ROOT "
                         "or put nvcc on PATH)")
        self.library = built


class BuildPy(build_py):
    """The Python files, plus the library, torch_hooks.cpp, the version and (when PyTorch's headers
    are here) the torch hooks."""

    def run(self):
        super().run()
        self.run_command("build_sublet_library")
        package = os.path.join(self.build_lib, "sublet_torch")
        self.copy_file(self.get_finalized_command("build_sublet_library").library, os.path.join(package, LIBRARY))
        os.makedirs(os.path.join(package, "_src"), exist_ok=True)
        hooks_source = os.path.join(package, "_src", "torch_hooks.cpp")
        self.copy_file(os.path.join(source_root(), "torch_allocator", "torch_hooks.cpp"), hooks_source)
        with open(os.path.join(package, "_version.py"), "w", encoding="utf-8") as f:
            f.write("VERSION = %r\n" % VERSION)
        self.build_hooks(package, hooks_source)

    def build_hooks(self, package, source):
        if os.environ.get("SUBLET_TORCH_HOOKS") == "0":
            return
        hooks = _module("build_hooks")
        try:
            path = hooks.build(os.path.join(package, hooks.HOOKS_NAME), source)
            self.announce("sublet-torch: torch hooks built for torch %s" % hooks.built_for(path), level=2)
        except hooks.HooksUnavailable as e:
            print("sublet-torch: torch hooks not built (%s); build them later with "
                  "`python -m sublet_torch.build_hooks`" % e)


class Sdist(sdist):
    """An sdist carries the parts of the checkout the library is built from."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        root = os.path.dirname(HERE)
        for part in SOURCE_PARTS:
            source, target = os.path.join(root, part), os.path.join(base_dir, "_sublet_src", part)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.isdir(source):
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, target)


class PlatformDistribution(Distribution):
    """Carries a compiled library: installed into platlib, and its wheel is platform-specific."""

    def has_ext_modules(self):
        return True


commands = {"build_sublet_library": BuildLibrary, "build_py": BuildPy, "sdist": Sdist}

if bdist_wheel is not None:
    class BdistWheel(bdist_wheel):
        """The library is loaded with ctypes: any Python 3, but only this platform."""

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    commands["bdist_wheel"] = BdistWheel

setup(version=VERSION, cmdclass=commands, distclass=PlatformDistribution)
