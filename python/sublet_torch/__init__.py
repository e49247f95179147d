"""sublet's caching allocator inside PyTorch, with the statistics PyTorch refuses to give for it.

    import sublet_torch
    sublet_torch.use()   # before the first CUDA tensor; settings from SUBLET_ALLOC_CONF & co.
    ...                  # train as usual: every CUDA tensor now lives in sublet's allocator
    print(sublet_torch.memory_summary())
    sublet_torch.dump_snapshot("snap.pickle")   # pytorch.org/memory_viz reads it

PyTorch 2.x accepts a custom allocator (torch.cuda.memory.CUDAPluggableAllocator), but then
torch.cuda.memory_allocated(), memory_stats(), memory_summary(), reset_peak_memory_stats() and
torch.cuda.memory._snapshot() raise "CUDAPluggableAllocator does not yet support ...". This
package asks sublet's library (libsublet_torch_allocator.so, shipped inside it) instead, under
PyTorch's names; with the torch hooks (python -m sublet_torch.build_hooks) PyTorch's own
functions work too. Plain Python + ctypes: PyTorch is imported only by use(), record_stream(),
device names and errors, so the statistics and simulated devices also work without it.

The allocator's settings come from the environment as sublet reads it (SUBLET_ALLOC_CONF, else
PYTORCH_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF), or from use(conf=...); this package reads none of
those variables itself.
"""
import collections
import os
import sys
import pickle

from . import _errors, _frames, _hooks, _library, _simulated
from ._cmake_version import package_version
from ._library import ENV_LIBRARY, LIBRARY_NAME, find as find_library
from ._simulated import ENV_SIMULATE
from .monitor import MemoryMonitor

__version__ = package_version() or "unknown"

__all__ = [
    "use", "load", "installed", "use_simulated_devices", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "memory_stats", "memory_summary", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "empty_cache", "set_per_process_memory_fraction", "record_stream",
    "caching_allocator_alloc", "caching_allocator_delete", "record_memory_history", "dump_snapshot", "snapshot",
    "live_allocations", "allocator_config", "library_version", "cuda_built", "MemoryMonitor", "find_library",
    "LIBRARY_NAME", "ENV_LIBRARY", "ENV_SIMULATE", "__version__",
]

_allocator = None  # what use() installed into PyTorch, kept alive for the process
_simulated_devices = None  # (count, capacity_bytes) once set up
_raw_devices = {}  # caching_allocator_alloc's pointers -> their device


def load(library=None, conf=None):
    """Loads the library without installing it into PyTorch (statistics, tests, simulated devices).
    `conf` (SUBLET_ALLOC_CONF syntax, PyTorch's keys) applies to allocators created after this call
    instead of the environment's; each device's allocator is created at its first allocation, and a
    conf that would change an existing allocator's settings raises RuntimeError."""
    lib = _library.load(library)
    if conf is not None:
        _library.check(lib, lib.sublet_torch_set_config(str(conf).encode()))
    return lib


def use_simulated_devices(count, capacity_bytes, library=None):
    """Devices 0..count-1 become simulated devices of capacity_bytes each (fake addresses: the
    memory must never be touched), for tests and what-if runs without a GPU. Before the first
    allocation only. Memory is then taken with caching_allocator_alloc()."""
    global _simulated_devices
    lib = load(library)
    _library.check(lib, lib.sublet_torch_use_simulated_devices(int(count), int(capacity_bytes)))
    _simulated_devices = (int(count), int(capacity_bytes))


def use(conf=None, library=None, record_history=False, max_entries=0, torch_hooks=None, stacks="python"):
    """Makes sublet's allocator PyTorch's CUDA allocator; returns the library's path. Call it before
    the first CUDA tensor: PyTorch can change its allocator only before it has allocated anything.
    conf: SUBLET_ALLOC_CONF text (e.g. "expandable_segments:True,max_split_size_mb:512"); None keeps
    the environment's settings on top of sublet's defaults (expandable segments on).
    library: the allocator library; None: the one shipped in this package ($SUBLET_TORCH_ALLOCATOR_LIBRARY
    overrides it).
    record_history: record allocator events from the start, so that dump_snapshot() has traces;
    with stacks="python" (the default) each allocation also carries its Python stack.
    torch_hooks: the torch hooks library; None: the ones built into this package for this PyTorch
    ($SUBLET_TORCH_HOOKS overrides them), with a warning when there are none; False: PyTorch's plain
    pluggable allocator. With the hooks, torch.cuda.memory_allocated() & co., cuDNN's benchmark,
    torch.cuda.empty_cache(), tensor.record_stream() and set_per_process_memory_fraction() reach
    sublet, and an allocation that finds no memory raises torch.OutOfMemoryError (without them,
    PyTorch turns it into a RuntimeError carrying sublet's report).
    With SUBLET_TORCH_SIMULATE=COUNTxSIZE (e.g. 1x8GiB) set, PyTorch is left alone: simulated
    devices are set up instead (use_simulated_devices), for machines without a GPU."""
    global _allocator
    if _allocator is not None or _simulated_devices is not None:
        return _library.path()
    simulated = _simulated.from_environment()
    if simulated is not None:
        load(library, conf)
        use_simulated_devices(*simulated)
        if record_history:
            record_memory_history(True, max_entries, stacks)
        return _library.path()
    try:
        import torch
    except ImportError as e:
        raise ImportError("sublet_torch.use() needs PyTorch (import torch failed: %s); without a GPU, %s=1x8GiB "
                          "simulates devices" % (e, ENV_SIMULATE)) from e
    if not hasattr(getattr(torch.cuda, "memory", None), "CUDAPluggableAllocator"):
        raise RuntimeError("sublet_torch.use(): PyTorch %s has no pluggable CUDA allocator "
                           "(torch.cuda.memory.CUDAPluggableAllocator, PyTorch >= 2.0); without a GPU, %s=1x8GiB "
                           "simulates devices" % (torch.__version__, ENV_SIMULATE))
    if not torch.cuda.is_available():
        raise RuntimeError("sublet_torch.use(): torch.cuda.is_available() is False; sublet's allocator serves CUDA "
                           "memory (without a GPU, %s=1x8GiB simulates devices)" % ENV_SIMULATE)
    lib = load(library, conf)
    if not lib.sublet_torch_cuda_built():
        raise RuntimeError("sublet_torch.use(): %s was built without the CUDA backend (no CUDA toolkit where it was "
                           "built); reinstall with a CUDA toolkit present" % _library.path())
    hooks = _hooks.choose(torch_hooks, torch.__version__)
    if record_history:
        record_memory_history(True, max_entries, stacks)
    if hooks:
        allocator = _hooks.install(hooks, _library.path())
    else:
        allocator = torch.cuda.memory.CUDAPluggableAllocator(_library.path(), "sublet_torch_malloc", "sublet_torch_free")
        try:
            torch.cuda.memory.change_current_allocator(allocator)
        except RuntimeError as e:
            raise RuntimeError("sublet_torch.use() came too late: PyTorch has already allocated CUDA memory with its "
                               "own allocator (%s). Call it at the start of the program, before any CUDA tensor" % e) from e
    _allocator = allocator
    return _library.path()


def installed():
    """True once use() has made sublet's allocator PyTorch's (False on simulated devices)."""
    return _allocator is not None


def _lib():
    lib = _library.loaded()
    return lib if lib is not None else load()


def _device(device):
    """A device index from None (the current device), an int, "cuda:N" or a torch.device."""
    if device is None or device == "cuda":
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.current_device()
        return 0
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        if device.startswith("cuda:"):
            return int(device[len("cuda:"):])
        raise ValueError("sublet_torch: expected a CUDA device, got %r" % device)
    index = getattr(device, "index", None)
    if getattr(device, "type", "cuda") != "cuda":
        raise ValueError("sublet_torch: expected a CUDA device, got %r" % (device,))
    return _device(index)


def _stat(key, device):
    import ctypes
    lib = _lib()
    value = ctypes.c_int64()
    _library.check(lib, lib.sublet_torch_stat(_device(device), key.encode(), ctypes.byref(value)))
    return value.value


def memory_allocated(device=None):
    """Bytes held by live tensors (torch.cuda.memory_allocated)."""
    return _stat("allocated_bytes.all.current", device)


def max_memory_allocated(device=None):
    return _stat("allocated_bytes.all.peak", device)


def memory_reserved(device=None):
    """Bytes the allocator holds from the device, cached blocks included (torch.cuda.memory_reserved)."""
    return _stat("reserved_bytes.all.current", device)


def max_memory_reserved(device=None):
    return _stat("reserved_bytes.all.peak", device)


def memory_stats(device=None):
    """torch.cuda.memory_stats(): an OrderedDict of PyTorch's flat keys, sorted, as torch returns it."""
    lib = _lib()
    text = _library.text(lib, lib.sublet_torch_memory_stats, _device(device))
    stats = []
    for line in text.splitlines():
        key, value = line.rsplit(" ", 1)
        stats.append((key, int(value)))
    stats.sort()
    return collections.OrderedDict(stats)


def memory_summary(device=None, abbreviated=False):
    """torch.cuda.memory_summary()'s table for sublet's allocator (`abbreviated` is accepted and ignored)."""
    lib = _lib()
    return _library.text(lib, lib.sublet_torch_memory_summary, _device(device))


def allocator_config(device=None):
    """(SUBLET_ALLOC_CONF text of the device's allocator, backend name)."""
    lib = _lib()
    conf, backend = _library.text(lib, lib.sublet_torch_config, _device(device)).split("\n", 1)
    return conf, backend


def reset_peak_memory_stats(device=None):
    lib = _lib()
    _library.check(lib, lib.sublet_torch_reset_peak_memory_stats(_device(device)))


def reset_accumulated_memory_stats(device=None):
    lib = _lib()
    _library.check(lib, lib.sublet_torch_reset_accumulated_memory_stats(_device(device)))


def empty_cache(device=-1):
    """Gives every cached, unused segment back to the device (all devices by default)."""
    lib = _lib()
    _library.check(lib, lib.sublet_torch_empty_cache(device if device == -1 else _device(device)))


def set_per_process_memory_fraction(fraction, device=None):
    """Caps the device's reserved memory at fraction * its capacity."""
    lib = _lib()
    _library.check(lib, lib.sublet_torch_set_memory_fraction(float(fraction), _device(device)))


def record_stream(tensor, stream):
    """tensor.record_stream(stream) for sublet's allocator (PyTorch does not pass record_stream to a
    pluggable allocator): the tensor's memory is reused only after `stream`'s work queued before its
    free has completed. `stream` is a torch.cuda.Stream (or a raw cudaStream_t as an int)."""
    lib = _lib()
    handle = getattr(stream, "cuda_stream", stream)
    storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()
    _library.check(lib, lib.sublet_torch_record_stream(storage.data_ptr(), handle))


def live_allocations(device=None):
    """What the library itself tracks: {"count", "requested_bytes", "block_bytes"} of live pointers."""
    import ctypes
    lib = _lib()
    count, requested, blocks = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
    _library.check(lib, lib.sublet_torch_live_allocations(_device(device), ctypes.byref(count), ctypes.byref(requested),
                                                          ctypes.byref(blocks)))
    return {"count": count.value, "requested_bytes": requested.value, "block_bytes": blocks.value}


def caching_allocator_alloc(size, device=None, stream=None):
    """torch.cuda.caching_allocator_alloc for sublet's allocator: `size` bytes on `device` for
    `stream` (a torch.cuda.Stream, a raw cudaStream_t as an int, or None: PyTorch's current stream
    once use() has installed the allocator, else the default stream), as an
    int address. Free it with caching_allocator_delete. Raises torch.OutOfMemoryError (RuntimeError
    without PyTorch) when the device has no room, with sublet's out-of-memory report."""
    lib = _lib()
    index = _device(device)
    if stream is None and installed():  # PyTorch's current stream, as torch.cuda.caching_allocator_alloc takes
        stream = sys.modules["torch"].cuda.current_stream(index)
    handle = getattr(stream, "cuda_stream", stream)
    ptr = lib.sublet_torch_try_malloc(int(size), index, handle)
    if not ptr:
        message = _library.last_error(lib)
        raise (_errors.out_of_memory_error() if lib.sublet_torch_last_error_is_out_of_memory() else RuntimeError)(message)
    _raw_devices[ptr] = index
    return ptr


def caching_allocator_delete(ptr):
    """Frees an address caching_allocator_alloc returned (torch.cuda.caching_allocator_delete)."""
    device = _raw_devices.pop(ptr, None)
    if device is None:
        raise ValueError("sublet_torch.caching_allocator_delete: %r is not an address caching_allocator_alloc returned "
                         "(or it was freed already)" % (ptr,))
    _lib().sublet_torch_free(ptr, 0, device, None)


def record_memory_history(enabled=True, max_entries=0, stacks="python"):
    """torch.cuda.memory._record_memory_history for sublet: record allocator events (the newest
    max_entries per device; 0: 1,000,000) for dump_snapshot's device_traces. enabled=False or None
    stops and drops them. stacks="python" (or "all": sublet records no C++ frames) gives each
    allocation its Python stack, shown as the frames of its block and alloc event; None records
    none (each allocation is then a few microseconds cheaper). Start before the first allocation
    for a history `sublet replay` accepts."""
    if stacks not in ("python", "all", None):
        raise ValueError("sublet_torch.record_memory_history: stacks must be 'python', 'all' or None, got %r" % (stacks,))
    lib = _lib()
    on = bool(enabled)
    _library.check(lib, lib.sublet_torch_record_history(1 if on else 0, int(max_entries)))
    if on and stacks is not None:
        _frames.enable(lib)
    else:
        _frames.disable()


def dump_snapshot(path):
    """Writes the allocator's segments (and the recorded history) as a pickle in the layout of
    torch.cuda.memory._dump_snapshot: pytorch.org/memory_viz, torch.cuda._memory_viz and
    `sublet replay` read it. Written by the library's C++ pickle writer."""
    lib = _lib()
    _library.check(lib, lib.sublet_torch_dump_snapshot(os.fspath(path).encode()))


def snapshot():
    """The snapshot as a dict (torch.cuda.memory._snapshot())."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "snapshot.pickle")
        dump_snapshot(path)
        with open(path, "rb") as f:
            return pickle.load(f)


def library_version():
    """The loaded library's version (CMake's project version); equals __version__."""
    lib = _lib()
    return lib.sublet_torch_version().decode()


def cuda_built():
    """True when the library has the CUDA backend (it was built with a CUDA toolkit)."""
    return bool(_lib().sublet_torch_cuda_built())

