"""Finding and loading libsublet_torch_allocator.so with ctypes (no PyTorch needed).

The package's build puts the library beside this file. It is looked for in this order: the
`library` argument, $SUBLET_TORCH_ALLOCATOR_LIBRARY, libsublet_torch_allocator.so beside this
package, and the build folders of the sublet checkout this package sits in (run from a checkout
with PYTHONPATH=python). A library whose version differs from the package's is refused.
"""
import ctypes
import os

from ._cmake_version import package_version

LIBRARY_NAME = "libsublet_torch_allocator.so"
ENV_LIBRARY = "SUBLET_TORCH_ALLOCATOR_LIBRARY"

_lib = None
_path = None


def _candidates(library):
    if library:
        return [library]
    found = []
    if os.environ.get(ENV_LIBRARY):
        found.append(os.environ[ENV_LIBRARY])
    here = os.path.dirname(os.path.abspath(__file__))
    found.append(os.path.join(here, LIBRARY_NAME))
    repo = os.path.dirname(os.path.dirname(here))  # python/sublet_torch -> the checkout
    for build in ("build", "build-torchalloc", "build-release"):
        found.append(os.path.join(repo, build, "torch_allocator", LIBRARY_NAME))
    return found


def find(library=None):
    """The path of the library to load; FileNotFoundError naming every place looked at."""
    candidates = _candidates(library)
    for path in candidates:
        if os.path.isfile(path):
            return os.path.realpath(path)
    raise FileNotFoundError(
        "sublet_torch: no %s found (looked at: %s). Install the package (pip install --no-build-isolation "
        "./python in the sublet checkout), or build the library with scripts/build_torch_allocator.sh OUT.so and "
        "pass library=OUT.so or set %s=OUT.so" % (LIBRARY_NAME, ", ".join(candidates), ENV_LIBRARY))


def _declare(lib):
    c = ctypes
    size_t, i64, vp = c.c_size_t, c.c_int64, c.c_void_p
    signatures = {
        "sublet_torch_malloc": (vp, [c.c_ssize_t, c.c_int, vp]),
        "sublet_torch_try_malloc": (vp, [c.c_ssize_t, c.c_int, vp]),
        "sublet_torch_free": (None, [vp, c.c_ssize_t, c.c_int, vp]),
        "sublet_torch_record_stream": (c.c_int, [vp, vp]),
        "sublet_torch_empty_cache": (c.c_int, [c.c_int]),
        "sublet_torch_reset_peak_memory_stats": (c.c_int, [c.c_int]),
        "sublet_torch_reset_accumulated_memory_stats": (c.c_int, [c.c_int]),
        "sublet_torch_set_memory_fraction": (c.c_int, [c.c_double, c.c_int]),
        "sublet_torch_cache_info": (c.c_int, [c.c_int, c.POINTER(size_t)]),
        "sublet_torch_stat": (c.c_int, [c.c_int, c.c_char_p, c.POINTER(i64)]),
        "sublet_torch_memory_stats": (size_t, [c.c_int, c.c_char_p, size_t]),
        "sublet_torch_memory_summary": (size_t, [c.c_int, c.c_char_p, size_t]),
        "sublet_torch_config": (size_t, [c.c_int, c.c_char_p, size_t]),
        "sublet_torch_last_error": (size_t, [c.c_char_p, size_t]),
        "sublet_torch_last_error_is_out_of_memory": (c.c_int, []),
        "sublet_torch_set_config": (c.c_int, [c.c_char_p]),
        "sublet_torch_set_frames_callback": (None, [c.c_void_p]),
        "sublet_torch_intern_frames": (c.c_uint32, [c.c_char_p]),
        "sublet_torch_version": (c.c_char_p, []),
        "sublet_torch_live_allocations": (c.c_int, [c.c_int, c.POINTER(i64), c.POINTER(i64), c.POINTER(i64)]),
        "sublet_torch_device_count": (c.c_int, []),
        "sublet_torch_record_history": (c.c_int, [c.c_int, size_t]),
        "sublet_torch_dump_snapshot": (c.c_int, [c.c_char_p]),
        "sublet_torch_use_simulated_devices": (c.c_int, [c.c_int, size_t]),
        "sublet_torch_cuda_built": (c.c_int, []),
    }
    for name, (restype, argtypes) in signatures.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            raise OSError("sublet_torch: %s has no function %s (a library from another sublet version?)"
                          % (_path, name)) from None
        function.restype = restype
        function.argtypes = argtypes


def load(library=None):
    """Loads the library once; later calls return the loaded one (and refuse another path)."""
    global _lib, _path
    if _lib is not None:
        if library and os.path.realpath(library) != _path:
            raise RuntimeError("sublet_torch: %s is already loaded; cannot switch to %s in the same process"
                               % (_path, library))
        return _lib
    path = find(library)
    _path = path
    lib = ctypes.CDLL(path)
    _declare(lib)
    expected, found = package_version(), lib.sublet_torch_version().decode()
    if expected is not None and found != expected:
        raise OSError("sublet_torch: %s is sublet %s, this package is %s; use the library built with it"
                      % (path, found, expected))
    _lib = lib
    return lib


def loaded():
    return _lib


def path():
    return _path


def last_error(lib):
    size = lib.sublet_torch_last_error(None, 0)
    buffer = ctypes.create_string_buffer(size + 1)
    lib.sublet_torch_last_error(buffer, size + 1)
    return buffer.value.decode("utf-8", "replace")


def text(lib, function, *args):
    """Calls one of the library's text functions (size first, then the text). None of them has
    an empty answer: 0 means failure."""
    size = function(*args, None, 0)
    if size == 0:
        raise RuntimeError(last_error(lib))
    buffer = ctypes.create_string_buffer(size + 1)
    function(*args, buffer, size + 1)
    return buffer.value.decode("utf-8", "replace")


def check(lib, status):
    if status != 0:
        raise RuntimeError(last_error(lib))
