"""The installed sublet_torch package, end to end, on a simulated device (no GPU, no PyTorch needed):
use() without arguments, allocations through the library that show in memory_stats(), an
out-of-memory error of PyTorch's type, a snapshot whose block carries this file's Python frame.
CI runs it after `pip install --no-build-isolation ./python` in a venv:

    SUBLET_TORCH_SIMULATE=1x1GiB v/bin/python tests/torch_allocator/check_package.py --installed --version X.Y.Z

--installed also checks that the library is the one shipped inside the installed package. Exits 1
with the first failed check.
"""
import argparse
import os
import sys

MiB = 1 << 20


def check(condition, what):
    if not condition:
        print("check_package: FAILED: %s" % what, file=sys.stderr)
        sys.exit(1)
    print("check_package: ok: %s" % what)


def allocate_in_a_named_function(size):
    import sublet_torch
    return sublet_torch.caching_allocator_alloc(size)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--installed", action="store_true", help="the library must be the package's own")
    parser.add_argument("--version", help="the version the package and its library must report (CMake's)")
    args = parser.parse_args()
    check(os.environ.get("SUBLET_TORCH_SIMULATE"), "SUBLET_TORCH_SIMULATE is set (e.g. 1x1GiB)")

    import sublet_torch
    from sublet_torch import _library

    path = sublet_torch.use()  # no arguments: the package's library, the environment's settings
    print("check_package: sublet_torch %s from %s, library %s (CUDA backend built: %s)"
          % (sublet_torch.__version__, os.path.dirname(sublet_torch.__file__), path, sublet_torch.cuda_built()))
    if args.installed:
        package = os.path.realpath(os.path.dirname(sublet_torch.__file__))
        check(os.path.dirname(path) == package, "the library is the one inside the installed package (%s)" % package)
        check(not os.environ.get(sublet_torch.ENV_LIBRARY), "%s is not set" % sublet_torch.ENV_LIBRARY)
    if args.version is not None:
        from importlib import metadata
        check(args.version != "", "--version names a version")
        check(sublet_torch.__version__ == args.version, "package version %s == %s" % (sublet_torch.__version__, args.version))
        check(sublet_torch.library_version() == args.version,
              "library version %s == %s" % (sublet_torch.library_version(), args.version))
        if args.installed:
            check(metadata.version("sublet-torch") == args.version, "installed metadata version == %s" % args.version)

    sublet_torch.record_memory_history(True)  # with Python stacks
    before, live_before = sublet_torch.memory_stats(), sublet_torch.live_allocations()
    size = 3 * MiB + 1
    ptr = allocate_in_a_named_function(size)
    after, live_after = sublet_torch.memory_stats(), sublet_torch.live_allocations()
    grew = after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"]
    check(grew == live_after["block_bytes"] - live_before["block_bytes"] and grew >= size,
          "allocated_bytes.all.current grew by the block's size (%d for %d bytes)" % (grew, size))
    check(after["requested_bytes.all.current"] - before["requested_bytes.all.current"] == size,
          "requested_bytes.all.current grew by the request")
    check(after["allocation.all.current"] - before["allocation.all.current"] == 1, "allocation.all.current grew by one")
    check(after["num_device_alloc"] > before["num_device_alloc"], "the device was asked for memory")
    check(after["reserved_bytes.all.current"] >= after["allocated_bytes.all.current"], "reserved >= allocated")

    snap = sublet_torch.snapshot()
    blocks = [b for s in snap["segments"] for b in s["blocks"] if b["address"] == ptr]
    check(len(blocks) == 1 and blocks[0]["state"] == "active_allocated", "the snapshot shows the block")
    names = [(os.path.basename(f["filename"]), f["name"]) for f in blocks[0]["frames"]]
    check(("check_package.py", "allocate_in_a_named_function") in names and ("check_package.py", "main") in names,
          "the block's frames are the Python stack that allocated it (%s)" % names[:3])
    allocs = [e for e in snap["device_traces"][0] if e["action"] == "alloc" and e["addr"] == ptr]
    check(len(allocs) == 1 and allocs[0]["frames"] == blocks[0]["frames"], "the alloc event carries the same frames")

    capacity = after["reserved_bytes.all.current"] + 2 * 1024 * MiB
    try:
        sublet_torch.caching_allocator_alloc(capacity)
        check(False, "an allocation larger than the device raises")
    except Exception as e:  # the type is the check
        error = e
    # PyTorch's class where this Python has PyTorch (torch.OutOfMemoryError, or the same class under
    # torch.cuda in older versions), RuntimeError without it.
    try:
        import torch
        expected = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    except ImportError:
        expected = RuntimeError
    check(type(error) is expected, "out of memory raises %s.%s (got %s.%s)" % (
        expected.__module__, expected.__name__, type(error).__module__, type(error).__name__))
    check("out of memory" in str(error), "its message is sublet's out-of-memory report")
    check(sublet_torch.memory_stats()["num_ooms"] == before["num_ooms"] + 1, "num_ooms counted it")

    sublet_torch.caching_allocator_delete(ptr)
    end = sublet_torch.memory_stats()
    check(end["allocated_bytes.all.current"] == before["allocated_bytes.all.current"], "the free gave the bytes back")
    check(_library.loaded() is not None and "Allocated memory" in sublet_torch.memory_summary(), "memory_summary() reads")
    print("check_package: all checks passed")


if __name__ == "__main__":
    main()
