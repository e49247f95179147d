"""sublet_torch inside a real PyTorch (2.x with CUDA) on a GPU: tensors allocated through
sublet_torch.use(), statistics that agree with what was allocated, snapshots with Python frames, and
an out-of-memory error of PyTorch's type. Run by scripts/gpu_pip_check.sh, once per mode, each in
its own process (PyTorch takes one allocator per process):

    python gpu_check_torch.py --hooks   # the torch hooks built into the package (python -m sublet_torch.build_hooks)
    python gpu_check_torch.py --plain   # PyTorch's plain pluggable allocator (torch_hooks=False)

Prints one line per check and a JSON summary last; exits 1 at the first failed check.
"""
import argparse
import json
import os
import sys
import warnings

MiB = 1 << 20
results = {}


def check(condition, what, **values):
    results[what] = {"ok": bool(condition), **values}
    print("gpu_check_torch: %s: %s %s" % ("ok" if condition else "FAILED", what, values if values else ""), flush=True)
    if not condition:
        print(json.dumps(results, indent=1))
        sys.exit(1)


def allocate_in_a_named_function(torch, elements):
    generator = torch.Generator(device="cuda").manual_seed(1234)
    return torch.randn(elements, device="cuda", generator=generator)


def main():
    parser = argparse.ArgumentParser()
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--hooks", action="store_true")
    mode.add_argument("--plain", action="store_true")
    args = parser.parse_args()

    import torch  # first, so that only use()'s own warnings are caught below
    import sublet_torch
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = sublet_torch.use(record_history=True, torch_hooks=None if args.hooks else False)
    print("gpu_check_torch: torch %s (CUDA %s) on %s; sublet_torch %s, library %s"
          % (torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), sublet_torch.__version__, path))
    check(sublet_torch.installed() and sublet_torch.cuda_built(), "use() installed the CUDA library")
    if args.hooks:
        about_hooks = [str(w.message) for w in caught if "torch hooks" in str(w.message)]
        check(not about_hooks, "use() found the torch hooks built for this PyTorch", warnings=about_hooks)

    base = sublet_torch.memory_stats()
    x = allocate_in_a_named_function(torch, 10 * MiB)  # 40 MiB of float32
    y = x * 2 + 1
    torch.cuda.synchronize()
    check(torch.equal(y, x * 2 + 1) and bool(torch.isfinite(y).all()), "the memory holds what kernels write")
    stats = sublet_torch.memory_stats()
    grew = stats["allocated_bytes.all.current"] - base["allocated_bytes.all.current"]
    check(grew >= 2 * x.nbytes, "sublet's allocated bytes grew by at least both tensors", grew=grew, tensors=2 * x.nbytes)
    check(sublet_torch.live_allocations()["block_bytes"] == stats["allocated_bytes.all.current"],
          "live blocks == allocated_bytes.all.current")
    check(stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"], "reserved >= allocated")
    if args.hooks:
        torch_stats = torch.cuda.memory_stats()
        check(torch_stats["allocated_bytes.all.current"] == stats["allocated_bytes.all.current"],
              "torch.cuda.memory_stats() is sublet's", torch_value=torch_stats["allocated_bytes.all.current"])
        check(torch.cuda.memory_allocated() == sublet_torch.memory_allocated(), "torch.cuda.memory_allocated() is sublet's")

    snap = sublet_torch.snapshot()
    ptr = x.untyped_storage().data_ptr()
    blocks = [b for s in snap["segments"] for b in s["blocks"] if b["address"] == ptr]
    names = [f["name"] for f in blocks[0]["frames"]] if blocks else []
    check("allocate_in_a_named_function" in names and "main" in names, "the tensor's block carries its Python frames",
          frames=names[:4])

    del x, y
    torch.cuda.synchronize()
    check(sublet_torch.memory_allocated() == base["allocated_bytes.all.current"], "freed tensors give their bytes back")

    total = torch.cuda.get_device_properties(0).total_memory
    ooms = sublet_torch.memory_stats()["num_ooms"]
    try:
        torch.empty(2 * total, dtype=torch.uint8, device="cuda")
        check(False, "a tensor larger than the GPU raises")
    except Exception as e:  # the type is the check
        error = e
    expected = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    if args.hooks:
        check(isinstance(error, expected), "out of memory raises torch.OutOfMemoryError", got=type(error).__name__)
    else:
        check(isinstance(error, RuntimeError), "out of memory raises a RuntimeError (plain pluggable allocator)",
              got=type(error).__name__)
    check("out of memory" in str(error), "its message is sublet's out-of-memory report")
    check(sublet_torch.memory_stats()["num_ooms"] == ooms + 1, "num_ooms counted it")
    z = torch.ones(MiB, device="cuda")
    check(float(z.sum()) == float(MiB), "allocations work after the out-of-memory error")

    if args.hooks:
        torch.backends.cudnn.benchmark = True
        conv = torch.nn.Conv2d(16, 32, 3, padding=1).cuda()
        out = conv(torch.randn(8, 16, 32, 32, device="cuda"))
        torch.cuda.synchronize()
        check(out.shape == (8, 32, 32, 32) and bool(torch.isfinite(out).all()), "cuDNN's benchmark runs (cacheInfo)")
        del conv, out
    del z
    torch.cuda.synchronize()
    reserved = sublet_torch.memory_reserved()
    if args.hooks:
        torch.cuda.empty_cache()
    else:
        sublet_torch.empty_cache()  # PyTorch's plain pluggable allocator does not pass empty_cache on
    check(sublet_torch.memory_reserved() < reserved, "empty_cache gives cached memory back",
          before=reserved, after=sublet_torch.memory_reserved())

    with open(os.path.join(os.environ.get("OUT", "."), "gpu_check_torch_%s.json" % ("hooks" if args.hooks else "plain")),
              "w") as f:
        json.dump(results, f, indent=1)
    print("gpu_check_torch: all checks passed (%s)" % ("hooks" if args.hooks else "plain"))


if __name__ == "__main__":
    main()
