"""sublet's caching allocator inside PyTorch, with the statistics PyTorch refuses to give for it.

    import sublet_torch
    sublet_torch.use(conf="expandable_segments:True", library="libsublet_torch_allocator.so")
    ...  # train as usual: every CUDA tensor now lives in sublet's allocator
    print(sublet_torch.memory_summary())
    sublet_torch.dump_snapshot("snap.pickle")   # pytorch.org/memory_viz reads it

PyTorch 2.x accepts a custom allocator (torch.cuda.memory.CUDAPluggableAllocator), but then
torch.cuda.memory_allocated(), memory_stats(), memory_summary(), reset_peak_memory_stats() and
torch.cuda.memory._snapshot() raise "CUDAPluggableAllocator does not yet support ...". This
package asks sublet's library instead, under PyTorch's names. Plain Python + ctypes: PyTorch is
imported only by use(), record_stream() and device names, so the statistics functions also work
without it (tests, simulated devices).

Limits (PyTorch's pluggable-allocator interface, not sublet's): tensor.record_stream() and
torch.cuda.empty_cache() do not reach the library (use sublet_torch.record_stream and
sublet_torch.empty_cache); PyTorch's cuDNN benchmark asks the allocator for cacheInfo, which some
PyTorch versions refuse for every pluggable allocator.
"""
import collections
import os
import pickle

from . import _library
from ._library import ENV_LIBRARY, LIBRARY_NAME, find as find_library
from .monitor import MemoryMonitor

__all__ = [
    "use", "load", "installed", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_stats", "memory_summary", "reset_peak_memory_stats", "reset_accumulated_memory_stats", "empty_cache",
    "set_per_process_memory_fraction", "record_stream", "record_memory_history", "dump_snapshot", "snapshot",
    "live_allocations", "allocator_config", "MemoryMonitor", "find_library", "LIBRARY_NAME", "ENV_LIBRARY",
]

CONF_VARIABLE = "SUBLET_ALLOC_CONF"
_allocator = None  # the CUDAPluggableAllocator, kept alive for the process


def load(library=None, conf=None):
    """Loads the library without installing it into PyTorch (statistics, tests, simulated devices).
    `conf` (SUBLET_ALLOC_CONF syntax, PyTorch's keys) applies to allocators created after this call:
    each device's allocator is created at its first allocation."""
    if conf is not None:
        lib = _library.loaded()
        if lib is not None and lib.sublet_torch_device_count() > 0 and os.environ.get(CONF_VARIABLE) != conf:
            raise RuntimeError("sublet_torch: allocators already exist with %s=%r; conf=%r would not apply. Pass conf "
                               "before the first allocation" % (CONF_VARIABLE, os.environ.get(CONF_VARIABLE), conf))
        os.environ[CONF_VARIABLE] = conf
    return _library.load(library)


def use(conf=None, library=None, record_history=False, max_entries=0, torch_hooks=None):
    """Makes sublet's allocator PyTorch's CUDA allocator. Call it before the first CUDA tensor:
    PyTorch can change its allocator only before it has allocated anything.
    conf: SUBLET_ALLOC_CONF text (e.g. "expandable_segments:True,max_split_size_mb:512"); None keeps
    the environment's (SUBLET_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF) on top of sublet's defaults
    (expandable segments on).
    record_history: record allocator events from the start, so that dump_snapshot() has traces.
    torch_hooks: libsublet_torch_hooks.so (scripts/build_torch_allocator.sh --torch-hooks, built
    against this PyTorch): installs sublet's allocator as a CUDAPluggableAllocator subclass that
    also answers cacheInfo (cuDNN's benchmark), getDeviceStats and the peak resets, so that
    torch.cuda.memory_allocated() & co. work too, and record_stream, empty_cache and
    set_per_process_memory_fraction reach sublet. Without it, PyTorch's plain pluggable allocator."""
    global _allocator
    try:
        import torch
    except ImportError as e:
        raise ImportError("sublet_torch.use() needs PyTorch (import torch failed: %s)" % e) from e
    if _allocator is not None:
        return _library.path()
    if not torch.cuda.is_available():
        raise RuntimeError("sublet_torch.use(): torch.cuda.is_available() is False; sublet's allocator serves CUDA memory")
    load(library, conf)
    if record_history:
        record_memory_history(True, max_entries)
    if torch_hooks:
        allocator = _install_torch_hooks(torch_hooks)
    else:
        allocator = torch.cuda.memory.CUDAPluggableAllocator(_library.path(), "sublet_torch_malloc", "sublet_torch_free")
        try:
            torch.cuda.memory.change_current_allocator(allocator)
        except RuntimeError as e:
            raise RuntimeError("sublet_torch.use() came too late: PyTorch has already allocated CUDA memory with its "
                               "own allocator (%s). Call it at the start of the program, before any CUDA tensor" % e) from e
    _allocator = allocator
    return _library.path()


def _install_torch_hooks(path):
    import ctypes
    if not os.path.isfile(path):
        raise FileNotFoundError("sublet_torch: torch_hooks=%r does not exist (build it with "
                                "scripts/build_torch_allocator.sh --torch-hooks HOOKS.so)" % path)
    hooks = ctypes.CDLL(os.path.realpath(path))
    hooks.sublet_torch_hooks_install.argtypes = [ctypes.c_char_p]
    hooks.sublet_torch_hooks_install.restype = ctypes.c_int
    hooks.sublet_torch_hooks_last_error.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    hooks.sublet_torch_hooks_last_error.restype = ctypes.c_size_t
    if hooks.sublet_torch_hooks_install(_library.path().encode()) != 0:
        buffer = ctypes.create_string_buffer(4096)
        hooks.sublet_torch_hooks_last_error(buffer, len(buffer))
        raise RuntimeError("sublet_torch.use(torch_hooks=...): %s (call use() before any CUDA tensor)"
                           % buffer.value.decode("utf-8", "replace"))
    return hooks


def installed():
    """True once use() has made sublet's allocator PyTorch's."""
    return _allocator is not None


def _lib():
    lib = _library.loaded()
    return lib if lib is not None else load()


def _device(device):
    """A device index from None (the current device), an int, "cuda:N" or a torch.device."""
    if device is None or device == "cuda":
        import sys
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


def record_memory_history(enabled=True, max_entries=0):
    """torch.cuda.memory._record_memory_history for sublet: record allocator events (the newest
    max_entries per device; 0: 1,000,000) for dump_snapshot's device_traces. enabled=False or None
    stops and drops them. Start before the first allocation for a history `sublet replay` accepts."""
    lib = _lib()
    _library.check(lib, lib.sublet_torch_record_history(1 if enabled else 0, int(max_entries)))


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


def _use_simulated_devices(count, capacity_bytes, library=None):
    """Tests and what-ifs without a GPU: devices 0..count-1 become simulated (fake addresses)."""
    lib = load(library)
    _library.check(lib, lib.sublet_torch_use_simulated_devices(int(count), int(capacity_bytes)))
