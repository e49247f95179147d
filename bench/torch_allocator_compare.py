#!/usr/bin/env python3
"""PyTorch's own CUDA allocator against sublet's (python/sublet_torch, libsublet_torch_allocator.so)
on the same training job: torchvision ResNet-50, 224x224, batch 64, SGD
(lr 0.1, momentum 0.9), cudnn.benchmark on, in fp32 and in bf16 autocast + channels_last.

    python3 bench/torch_allocator_compare.py --library libsublet_torch_allocator.so \
        [--conf expandable_segments:True] [--steps 30] [--warmup 10] [--rounds 1] [--json OUT.json]

Each (allocator, precision) runs in its own subprocess: PyTorch accepts a new allocator only before
its first CUDA allocation. Same seed everywhere: the weights are made on the CPU, the batch is one
fixed random batch. Printed per precision: step time median (timed steps), peak allocated and peak
reserved over the whole run (warm-up and cuDNN's benchmark included, as torch.cuda.max_memory_*
count them), reserved/allocated, and the largest |loss - native loss| over the first 20 steps.
In the sublet run its statistics are checked against the allocator's own accounting: the pointers
the library tracks (count, requested and block bytes) against memory_stats(), the snapshot's blocks
and segments against memory_allocated()/memory_reserved(), and probe tensors of known sizes against
the changes of memory_allocated(). Both runs also report the bytes of CUDA tensors Python can see
(gc) against memory_allocated() (the rest is PyTorch's internal workspaces, e.g. cuBLAS's).

Acceptance (exit status 1 when one fails, 0 when all pass): sublet's step time <= 1.02x native's,
sublet's peak reserved <= 1.02x its peak allocated, the first 20 losses within --loss-tolerance of
native's (relative), every statistics check passes. Exit status 2: something missing (PyTorch,
torchvision, a GPU, the library); 3: a run failed (its message is printed). sublet's default conf,
expandable_segments:True, is what keeps reserved close to allocated: one growing segment per
stream instead of 2 MiB/20 MiB segments whose free tails stay reserved.
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = float(1 << 20)
LOSS_STEPS = 20


def fail(code, message):
    print("torch_allocator_compare: " + message, file=sys.stderr)
    sys.exit(code)


# ---- the worker: one training run under one allocator ------------------------------------------

def cuda_tensor_bytes(torch):
    """Bytes of the distinct CUDA storages reachable from Python objects, each rounded to 512."""
    seen = {}
    for obj in gc.get_objects():
        try:
            if isinstance(obj, torch.Tensor) and obj.is_cuda:
                storage = obj.untyped_storage()
                seen[storage.data_ptr()] = storage.nbytes()
        except Exception:  # objects that fail isinstance or have no storage (e.g. meta, sparse)
            continue
    return sum(max(512, (n + 511) // 512 * 512) for n in seen.values()), len(seen)


def sublet_checks(torch, sublet_torch):
    checks = {}

    def check(name, ok, detail):
        checks[name] = {"ok": bool(ok), "detail": detail}

    torch.cuda.synchronize()
    stats = sublet_torch.memory_stats()
    live = sublet_torch.live_allocations()
    check("tracked pointers == allocation.all.current", live["count"] == stats["allocation.all.current"],
          "%d tracked, %d in memory_stats" % (live["count"], stats["allocation.all.current"]))
    check("tracked block bytes == memory_allocated", live["block_bytes"] == sublet_torch.memory_allocated(),
          "%d tracked, %d memory_allocated" % (live["block_bytes"], sublet_torch.memory_allocated()))
    check("tracked requested bytes == requested_bytes.all.current",
          live["requested_bytes"] == stats["requested_bytes.all.current"],
          "%d tracked, %d in memory_stats" % (live["requested_bytes"], stats["requested_bytes.all.current"]))
    snap = sublet_torch.snapshot()
    in_blocks = sum(b["size"] for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
    in_segments = sum(s["total_size"] for s in snap["segments"])
    check("snapshot blocks == memory_allocated", in_blocks == sublet_torch.memory_allocated(),
          "%d in active blocks, %d memory_allocated" % (in_blocks, sublet_torch.memory_allocated()))
    check("snapshot segments == memory_reserved", in_segments == sublet_torch.memory_reserved(),
          "%d in segments, %d memory_reserved" % (in_segments, sublet_torch.memory_reserved()))
    check("peaks >= current", sublet_torch.max_memory_allocated() >= sublet_torch.memory_allocated()
          and sublet_torch.max_memory_reserved() >= sublet_torch.memory_reserved(), "")
    # Probe tensors of known sizes: each moves memory_allocated by its block and the requested
    # bytes by exactly its size; freeing it moves both back.
    bad = []
    for nbytes in (1, 511, 512, 1000, 1 << 20, (3 << 20) + 5, 50 << 20):
        before_alloc, before_req = sublet_torch.memory_allocated(), sublet_torch.memory_stats()["requested_bytes.all.current"]
        before_live = sublet_torch.live_allocations()["block_bytes"]
        t = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        grown = sublet_torch.memory_allocated() - before_alloc
        requested = sublet_torch.memory_stats()["requested_bytes.all.current"] - before_req
        tracked = sublet_torch.live_allocations()["block_bytes"] - before_live
        if requested != nbytes or grown != tracked or grown < nbytes or grown % 512 != 0:
            bad.append("%d B: allocated +%d, requested +%d, tracked +%d" % (nbytes, grown, requested, tracked))
        del t
        if sublet_torch.memory_allocated() != before_alloc:
            bad.append("%d B: allocated not back after del (%d != %d)" % (nbytes, sublet_torch.memory_allocated(),
                                                                       before_alloc))
    check("probe tensors move the statistics by their sizes", not bad, "; ".join(bad) or "7 sizes")
    return checks


def run_worker(args):
    result = {"allocator": args.allocator, "precision": args.precision}
    try:
        import torch
        import torchvision
    except ImportError as e:
        fail(2, "the worker cannot import PyTorch/torchvision: %s" % e)
    sublet_torch = None
    if args.allocator == "sublet":
        sys.path.insert(0, os.path.join(REPO, "python"))
        import sublet_torch
        result["library"] = sublet_torch.use(conf=args.conf, library=args.library, torch_hooks=args.torch_hooks)
        result["torch_hooks"] = args.torch_hooks
        result["conf"] = os.environ.get("SUBLET_ALLOC_CONF", "")
    else:
        result["conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    cuda = torch.cuda
    result.update(torch=torch.__version__, torchvision=torchvision.__version__, device=cuda.get_device_name(0))

    torch.backends.cudnn.benchmark = args.cudnn_benchmark and not args.deterministic
    if args.deterministic:
        # The loss check: cuDNN's benchmark picks algorithms by timing, so two runs of the same
        # allocator may already differ (atomics in weight gradients), and at lr 0.1 a random-label
        # ResNet-50 amplifies that within a few steps. Deterministic kernels make the losses a
        # function of the data and weights only (warn_only: the few ops without a deterministic
        # kernel still run; the native-vs-native row shows what remains).
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet50()  # weights from the CPU generator: the same in every run
    generator = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=generator)
    y = torch.randint(0, 1000, (args.batch_size,), generator=generator)
    bf16 = args.precision == "bf16"
    memory_format = torch.channels_last if bf16 else torch.contiguous_format
    model = model.cuda().to(memory_format=memory_format)
    x = x.cuda().to(memory_format=memory_format)
    y = y.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    stats = sublet_torch if sublet_torch else cuda
    losses, times = [], []
    whole_run = (0, 0)  # the peaks before the timed steps (none without a warm-up)
    try:
        for i in range(args.warmup + args.steps):
            if i == args.warmup:
                cuda.synchronize()
                whole_run = (stats.max_memory_allocated(), stats.max_memory_reserved())
                stats.reset_peak_memory_stats()
            start = time.perf_counter()
            losses.append(step())
            cuda.synchronize()
            if i >= args.warmup:
                times.append(time.perf_counter() - start)
    except RuntimeError as e:
        text = str(e)
        hint = ""
        if "cacheInfo" in text:
            hint = (" -- PyTorch's cuDNN benchmark (torch.backends.cudnn.benchmark = True) asks the allocator for "
                    "cacheInfo, which this PyTorch's CUDAPluggableAllocator refuses for every custom allocator; "
                    "build the torch hooks (scripts/build_torch_allocator.sh --torch-hooks HOOKS.so) and pass "
                    "--torch-hooks HOOKS.so, or rerun with --no-cudnn-benchmark to compare without it")
        result["error"] = "%s: %s%s" % (type(e).__name__, text.splitlines()[0] if text else "", hint)
        return result
    steady = (stats.max_memory_allocated(), stats.max_memory_reserved())
    result.update(
        losses=[float(v) for v in torch.stack(losses).float().cpu()],
        step_times_s=times,
        median_step_s=statistics.median(times),
        peak_allocated=max(whole_run[0], steady[0]),
        peak_reserved=max(whole_run[1], steady[1]),
        steady_peak_allocated=steady[0],
        steady_peak_reserved=steady[1],
    )
    all_stats = stats.memory_stats()
    for key in ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms"):
        result[key] = all_stats.get(key)
    del losses
    gc.collect()
    cuda.synchronize()
    visible, storages = cuda_tensor_bytes(torch)
    result["python_visible_tensor_bytes"] = visible
    result["python_visible_storages"] = storages
    result["memory_allocated_at_end"] = stats.memory_allocated()
    if sublet_torch:
        result["checks"] = sublet_checks(torch, sublet_torch)
        result["conf"], result["backend"] = sublet_torch.allocator_config()
        result["checks"]["gc-visible tensors <= memory_allocated"] = {
            "ok": visible <= result["memory_allocated_at_end"],
            "detail": "%d visible, %d allocated" % (visible, result["memory_allocated_at_end"])}
        if args.torch_hooks:  # then PyTorch's own functions read sublet's statistics too
            same = (cuda.memory_allocated() == sublet_torch.memory_allocated()
                    and cuda.max_memory_reserved() == sublet_torch.max_memory_reserved())
            result["checks"]["torch.cuda.memory_* == sublet_torch's (torch hooks)"] = {
                "ok": same, "detail": "torch %d/%d, sublet %d/%d" % (
                    cuda.memory_allocated(), cuda.max_memory_reserved(), sublet_torch.memory_allocated(),
                    sublet_torch.max_memory_reserved())}
        if args.snapshot_dir:
            os.makedirs(args.snapshot_dir, exist_ok=True)
            sublet_torch.dump_snapshot(os.path.join(args.snapshot_dir, "sublet_%s.pickle" % args.precision))
    return result


# ---- the parent: runs, table, acceptance -------------------------------------------------------

def preflight(args):
    try:
        import torch
    except ImportError as e:
        fail(2, "PyTorch is not importable with %s (%s); run with PyTorch 2.x's python (e.g. "
                "/opt/torch/.venv/bin/python3)" % (sys.executable, e))
    try:
        import torchvision  # noqa: F401
    except ImportError as e:
        fail(2, "torchvision is not importable with %s (%s)" % (sys.executable, e))
    if not torch.cuda.is_available():
        fail(2, "torch.cuda.is_available() is False (torch %s, CUDA %s): this comparison needs a GPU"
             % (torch.__version__, torch.version.cuda))
    if not hasattr(torch.cuda.memory, "CUDAPluggableAllocator"):
        fail(2, "torch %s has no torch.cuda.memory.CUDAPluggableAllocator (PyTorch >= 2.0 needed)" % torch.__version__)
    sys.path.insert(0, os.path.join(REPO, "python"))
    try:
        import sublet_torch
    except ImportError as e:
        fail(2, "cannot import sublet_torch from %s/python: %s" % (REPO, e))
    try:
        args.library = sublet_torch.find_library(args.library)
    except FileNotFoundError as e:
        fail(2, str(e))
    if args.torch_hooks and not os.path.isfile(args.torch_hooks):
        fail(2, "--torch-hooks %s does not exist (scripts/build_torch_allocator.sh --torch-hooks HOOKS.so builds it "
                "against this PyTorch)" % args.torch_hooks)
    if args.torch_hooks:
        args.torch_hooks = os.path.abspath(args.torch_hooks)
    return torch


def run_one(args, allocator, precision, deterministic=False):
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "result.json")
        steps, warmup = (LOSS_STEPS, 0) if deterministic else (args.steps, args.warmup)
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--allocator", allocator, "--precision", precision,
                   "--result-file", out, "--library", args.library, "--conf", args.conf, "--steps", str(steps),
                   "--warmup", str(warmup), "--batch-size", str(args.batch_size), "--image-size",
                   str(args.image_size), "--seed", str(args.seed)]
        if deterministic:
            command.append("--deterministic")
        if not args.cudnn_benchmark:
            command.append("--no-cudnn-benchmark")
        if args.torch_hooks:
            command += ["--torch-hooks", args.torch_hooks]
        if args.snapshot_dir:
            command += ["--snapshot-dir", args.snapshot_dir]
        env = dict(os.environ)
        env.pop("SUBLET_ALLOC_CONF", None)  # the sublet run sets it from --conf
        if deterministic:
            env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # cuBLAS's deterministic mode
        print("torch_allocator_compare: running %s %s%s ..." % (allocator, precision, " (deterministic)" if deterministic else ""),
              flush=True)
        proc = subprocess.run(command, env=env, timeout=args.timeout)
        if not os.path.exists(out):
            return {"allocator": allocator, "precision": precision,
                    "error": "the worker exited with status %d and wrote no result" % proc.returncode}
        with open(out) as f:
            return json.load(f)


def median_of_runs(runs):
    """One record from several rounds: memory from the first, step time the fastest round's median."""
    first = dict(runs[0])
    if all("error" not in r for r in runs):
        first["median_step_s"] = min(r["median_step_s"] for r in runs)
        first["round_medians_s"] = [r["median_step_s"] for r in runs]
    else:
        first["error"] = next(r["error"] for r in runs if "error" in r)
    return first


def paired_time_ratio(native, sublet):
    """sublet's step time over native's, and how it was formed. With several rounds: the median of
    each round's ratio (a round runs the two allocators back to back, in alternating order), so a
    drift of the host between rounds cancels: one allocator's round medians can differ far more
    within a job than the two runs of a round, which move together. With one round: the ratio of
    the two medians."""
    n, s = native.get("round_medians_s"), sublet.get("round_medians_s")
    if n and s and len(n) == len(s) and len(n) > 1:
        ratios = sorted(b / a for a, b in zip(n, s))
        return statistics.median(ratios), "median of %d rounds' ratios, %.3f-%.3f" % (len(ratios), ratios[0], ratios[-1])
    return sublet["median_step_s"] / native["median_step_s"], "one round"


def compare(args):
    torch = preflight(args)
    print("torch_allocator_compare: torch %s, %s, library %s, torch hooks %s, sublet conf %r, cudnn.benchmark %s"
          % (torch.__version__, torch.cuda.get_device_name(0), args.library, args.torch_hooks, args.conf,
             args.cudnn_benchmark))
    precisions = [p for p in args.precisions.split(",") if p]
    results = {}
    for precision in precisions:
        runs = {"native": [], "sublet": []}
        for r in range(args.rounds):
            order = ("native", "sublet") if r % 2 == 0 else ("sublet", "native")  # alternate: hosts drift
            for allocator in order:
                runs[allocator].append(run_one(args, allocator, precision))
        results[precision] = {a: median_of_runs(v) for a, v in runs.items()}
        if args.loss_check:
            for name, allocator in (("native_deterministic", "native"), ("native_deterministic_again", "native"),
                                    ("sublet_deterministic", "sublet")):
                results[precision][name] = run_one(args, allocator, precision, deterministic=True)

    verdicts, errors = [], []
    header = "| precision | allocator | step ms (median) | peak allocated MiB | peak reserved MiB | reserved/allocated | losses 1-20 max abs diff vs native |"
    lines = [header, "|" + "---|" * 7]
    for precision, pair in results.items():
        native, sublet = pair["native"], pair["sublet"]
        for name, r in (("native", native), ("sublet", sublet)):
            if "error" in r:
                errors.append("%s %s: %s" % (name, precision, r["error"]))
                lines.append("| %s | %s | failed | | | | |" % (precision, name))
                continue
            ratio = r["peak_reserved"] / r["peak_allocated"] if r["peak_allocated"] else float("nan")
            diff = ""
            if name == "sublet" and "error" not in native:
                n = min(LOSS_STEPS, len(native["losses"]), len(r["losses"]))
                deltas = [abs(a - b) for a, b in zip(native["losses"][:n], r["losses"][:n])]
                r["loss_max_abs_diff"] = max(deltas) if deltas else float("nan")
                r["loss_max_rel_diff"] = max(d / max(abs(b), 1e-12) for d, b in zip(deltas, native["losses"][:n]))
                diff = "%.3g (rel %.3g)" % (r["loss_max_abs_diff"], r["loss_max_rel_diff"])
            lines.append("| %s | %s | %.2f | %.0f | %.0f | %.3f | %s |" % (
                precision, name, r["median_step_s"] * 1e3, r["peak_allocated"] / MiB, r["peak_reserved"] / MiB, ratio, diff))
        if "error" in native or "error" in sublet:
            continue
        time_ratio, how = paired_time_ratio(native, sublet)
        verdicts.append(("%s: sublet step time %.3fx native (<= %.2f; %s)" % (precision, time_ratio, args.max_time_ratio, how),
                         time_ratio <= args.max_time_ratio))
        ratio = sublet["peak_reserved"] / sublet["peak_allocated"]
        verdicts.append(("%s: sublet peak reserved %.3fx its peak allocated (<= %.2f)" % (precision, ratio, args.max_reserved_ratio),
                         ratio <= args.max_reserved_ratio))
        # With cuDNN's benchmark the algorithms differ from run to run: shown, not judged.
        verdicts.append(("%s: first %d losses with cudnn.benchmark, max relative difference to native's %.3g (algorithms "
                         "chosen by timing differ between runs)" % (precision, LOSS_STEPS, sublet["loss_max_rel_diff"]), None))
        if args.loss_check:
            det = [pair.get(k, {}) for k in ("native_deterministic", "native_deterministic_again", "sublet_deterministic")]
            if any("error" in d or "losses" not in d for d in det):
                errors.append("%s deterministic loss runs: %s" % (precision, next((d.get("error") for d in det if "error" in d),
                                                                                  "no losses")))
            else:
                def rel(a, b):  # NaN-safe: a NaN loss makes the difference NaN, and NaN <= x is False
                    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a[:LOSS_STEPS], b[:LOSS_STEPS]))
                noise = rel(det[1]["losses"], det[0]["losses"])
                diff = rel(det[2]["losses"], det[0]["losses"])
                pair["deterministic_native_vs_native_rel"] = noise
                pair["deterministic_sublet_vs_native_rel"] = diff
                verdicts.append(("%s: deterministic kernels: first %d losses of sublet within relative %.1e of native's "
                                 "(max %.3g; native against itself %.3g)" % (precision, LOSS_STEPS, args.loss_tolerance,
                                                                            diff, noise), diff <= args.loss_tolerance))
        for name, c in sorted(sublet.get("checks", {}).items()):
            verdicts.append(("%s: statistics check: %s (%s)" % (precision, name, c["detail"]), c["ok"]))
        verdicts.append(("%s: python-visible CUDA tensors %.0f MiB (native run %.0f MiB), memory_allocated %.0f MiB "
                         "(native %.0f MiB) at the end" % (precision, sublet["python_visible_tensor_bytes"] / MiB,
                                                            native["python_visible_tensor_bytes"] / MiB,
                                                            sublet["memory_allocated_at_end"] / MiB,
                                                            native["memory_allocated_at_end"] / MiB), None))
    print()
    print("\n".join(lines))
    print()
    for text, ok in verdicts:
        print("%s %s" % ({True: "PASS", False: "FAIL", None: "info"}[ok], text))
    for e in errors:
        print("ERROR " + e)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"format": "sublet-torch-allocator-compare", "version": 1, "conf": args.conf,
                       "library": args.library, "steps": args.steps, "warmup": args.warmup,
                       "batch_size": args.batch_size, "image_size": args.image_size, "rounds": args.rounds,
                       "cudnn_benchmark": args.cudnn_benchmark, "torch_hooks": args.torch_hooks, "results": results,
                       "verdicts": [{"text": t, "ok": ok} for t, ok in verdicts], "errors": errors}, f, indent=1)
        print("torch_allocator_compare: wrote %s" % args.json)
    if errors:
        sys.exit(3)
    sys.exit(0 if all(ok is not False for _, ok in verdicts) else 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--library", default=None, help="libsublet_torch_allocator.so (default: $SUBLET_TORCH_ALLOCATOR_LIBRARY, then the build folders)")
    p.add_argument("--conf", default="expandable_segments:True", help="SUBLET_ALLOC_CONF of the sublet runs")
    p.add_argument("--precisions", default="fp32,bf16", help="comma-separated: fp32 (contiguous), bf16 (autocast + channels_last)")
    p.add_argument("--steps", type=int, default=30, help="timed steps (after the warm-up)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=1, help="runs per allocator and precision, alternating the order")
    p.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false")
    p.add_argument("--torch-hooks", default=None,
                   help="libsublet_torch_hooks.so (scripts/build_torch_allocator.sh --torch-hooks): cacheInfo for cuDNN's "
                        "benchmark and torch.cuda.memory_* for sublet")
    p.add_argument("--max-time-ratio", type=float, default=1.02)
    p.add_argument("--max-reserved-ratio", type=float, default=1.02)
    p.add_argument("--loss-tolerance", type=float, default=1e-4,
                   help="relative; cuDNN's benchmark may pick other algorithms in each run, so bit-equality is not expected")
    p.add_argument("--snapshot-dir", default=None, help="also dump sublet's snapshot pickle of each run here")
    p.add_argument("--timeout", type=int, default=900, help="seconds per run")
    p.add_argument("--json", default=None)
    p.add_argument("--no-loss-check", dest="loss_check", action="store_false",
                   help="skip the deterministic runs that compare the first 20 losses")
    p.add_argument("--deterministic", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--allocator", choices=("native", "sublet"), help=argparse.SUPPRESS)
    p.add_argument("--precision", choices=("fp32", "bf16"), help=argparse.SUPPRESS)
    p.add_argument("--result-file", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.warmup + args.steps < LOSS_STEPS:
        p.error("--warmup + --steps must be at least %d (the losses compared) and --steps at least 1" % LOSS_STEPS)
    if args.worker:
        result = run_worker(args)
        with open(args.result_file, "w") as f:
            json.dump(result, f)
        sys.exit(3 if "error" in result else 0)
    compare(args)


if __name__ == "__main__":
    main()
