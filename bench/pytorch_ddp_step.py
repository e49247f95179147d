#!/usr/bin/env python3
"""The PyTorch baseline of `sublet bench step --nproc-per-node N`: DistributedDataParallel steps.

    torchrun --nproc-per-node N bench/pytorch_ddp_step.py --model M [--input CxHxW] [--batch-size B]
        [--classes K] [--steps N] [--warmup W] [--small-input-stem] [--seed S] [--bucket-cap-mb MB]
        [--precision fp32|bf16|fp16] [--channels-last] [--json PATH]

Each rank times the step of bench/pytorch_step.py (forward, cross-entropy, backward, SGD lr 0.1
momentum 0.9, zero_grad(set_to_none)) with the model wrapped in DDP (NCCL, bucket_cap_mb as
given, gradient_as_bucket_view=True as sublet's gradients are views into its buckets), on a
batch of B images per rank. Before that, rank 0 times the same step without DDP on its GPU
alone (the other ranks wait at a barrier): the single-GPU baseline of the scaling efficiency,
total img/s / (world size x single-GPU img/s). Rank 0 prints the table and writes the JSON.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_step import MODEL_NAMES, Recipe, create_model, format_bytes, parse_input, training_step  # noqa: E402


def time_steps(model, optimizer, images, labels, warmup, steps, recipe):
    def step():
        return training_step(model, optimizer, images, labels, recipe)

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step_ms = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        step_ms.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(step_ms)


def build(args, shape, device, recipe):
    torch.manual_seed(args.seed)
    model = create_model(args.model, shape[0], args.classes, args.small_input_stem).to(device)
    model = model.to(memory_format=recipe.memory_format)
    model.train()
    images = torch.randn(args.batch_size, *shape, device=device).contiguous(memory_format=recipe.memory_format)
    labels = torch.randint(0, args.classes, (args.batch_size,), device=device)
    return model, images, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=MODEL_NAMES)
    parser.add_argument("--input", default="3x32x32", help="CxHxW")
    parser.add_argument("--batch-size", type=int, default=128, help="images per rank and step")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--small-input-stem", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bucket-cap-mb", type=int, default=25)
    parser.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                        help="autocast dtype of the step (fp16 with GradScaler)")
    parser.add_argument("--channels-last", action="store_true", help="model and batch in torch.channels_last")
    parser.add_argument("--json", help="rank 0 writes the result here")
    args = parser.parse_args()
    if "RANK" not in os.environ:
        raise SystemExit("error: run under torchrun (it sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)")
    if not torch.cuda.is_available():
        raise SystemExit("error: DDP with NCCL needs CUDA devices")
    shape = parse_input(args.input)
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.backends.cudnn.benchmark = True
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()

    single_ms = None
    if rank == 0:
        recipe = Recipe(args.precision, args.channels_last, "cuda")
        model, images, labels = build(args, shape, device, recipe)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        single_ms = time_steps(model, optimizer, images, labels, args.warmup, args.steps, recipe)
        del model, optimizer, images, labels
        torch.cuda.empty_cache()
    dist.barrier()

    recipe = Recipe(args.precision, args.channels_last, "cuda")  # a fresh GradScaler for the DDP run
    model, images, labels = build(args, shape, device, recipe)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], bucket_cap_mb=args.bucket_cap_mb,
                                                    gradient_as_bucket_view=True)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    ms = time_steps(ddp, optimizer, images, labels, args.warmup, args.steps, recipe)
    per_rank = torch.zeros(world, dtype=torch.float64, device=device)
    per_rank[rank] = args.batch_size * 1000.0 / ms
    dist.all_reduce(per_rank)
    peak_allocated, peak_reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    if rank == 0:
        per_rank_img = per_rank.tolist()
        total = sum(per_rank_img)
        single = args.batch_size * 1000.0 / single_ms
        result = {
            "framework": f"pytorch {torch.__version__} DDP",
            "model": args.model, "input": args.input, "batch_size_per_rank": args.batch_size,
            "world_size": world, "bucket_cap_mb": args.bucket_cap_mb, "steps": args.steps, "warmup": args.warmup,
            "precision": args.precision, "memory_format": "channels_last" if args.channels_last else "contiguous",
            "ms_per_step_rank0": ms, "per_rank_img_per_s": per_rank_img, "total_img_per_s": total,
            "single_gpu_img_per_s": single, "scaling_efficiency": total / (world * single),
            "peak_allocated_bytes_rank0": peak_allocated, "peak_reserved_bytes_rank0": peak_reserved,
        }
        print(f"{'framework':<22} {'model':<9} {'world':>5} {'img/s per GPU':>14} {'total img/s':>12} "
              f"{'1-GPU img/s':>12} {'efficiency':>10} {'peak alloc':>11}")
        print(f"{result['framework']:<22} {args.model:<9} {world:>5} {total / world:>14.1f} {total:>12.1f} "
              f"{single:>12.1f} {100 * result['scaling_efficiency']:>9.1f}% {format_bytes(peak_allocated):>11}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
                f.write("\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
