#!/usr/bin/env python3
"""Records PyTorch memory snapshots of short training runs, with memory_stats() beside each, for
checking `sublet replay` / `sublet plan` against PyTorch's own accounting.

    python3 bench/record_torch_snapshots.py OUT_DIR [--steps N]

One subprocess per allocator setting (PYTORCH_CUDA_ALLOC_CONF is read once, at CUDA's start):
torchvision resnet18 (32x32, batch 32) and resnet50 (224x224, batch 8), fp32 and bf16 autocast,
under PyTorch's default, expandable_segments:True, max_split_size_mb:128 and
roundup_power2_divisions:4. Writes NAME.pickle (torch.cuda.memory._dump_snapshot) and NAME.json
({"memory_stats": ..., "alloc_conf": ..., "model": ..., "precision": ...}).
"""
import argparse
import json
import os
import subprocess
import sys

SETTINGS = {"default": "", "expandable": "expandable_segments:True", "maxsplit128": "max_split_size_mb:128",
            "div4": "roundup_power2_divisions:4"}
RUNS = [("resnet18", 32, 32, "fp32"), ("resnet18", 32, 32, "bf16"), ("resnet50", 224, 8, "fp32")]


def record(out_dir, name, model_name, size, batch, precision, steps):
    import torch
    import torchvision
    torch.backends.cudnn.benchmark = True
    # Before anything is allocated: the history must start from an empty allocator to replay.
    try:
        torch.cuda.memory._record_memory_history(max_entries=2_000_000, context=None, stacks="python")
    except TypeError:
        torch.cuda.memory._record_memory_history(max_entries=2_000_000)
    model = getattr(torchvision.models, model_name)(num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(batch, 3, size, size, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    for _ in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(os.path.join(out_dir, name + ".pickle"))
    stats = torch.cuda.memory_stats()
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump({"memory_stats": stats, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                   "model": model_name, "batch_size": batch, "input": size, "precision": precision,
                   "torch": torch.__version__}, f, indent=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--one", nargs=6, help=argparse.SUPPRESS)  # internal: NAME MODEL SIZE BATCH PRECISION STEPS
    a = p.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    if a.one:
        name, model, size, batch, precision, steps = a.one
        record(a.out_dir, name, model, int(size), int(batch), precision, int(steps))
        return
    failures = 0
    for setting, conf in SETTINGS.items():
        for model, size, batch, precision in RUNS:
            name = f"{model}_{precision}_{setting}"
            env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
            r = subprocess.run([sys.executable, __file__, a.out_dir, "--one", name, model, str(size), str(batch),
                                precision, str(a.steps)], env=env)
            print(f"{name}: {'ok' if r.returncode == 0 else 'FAILED'}", flush=True)
            failures += r.returncode != 0
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
