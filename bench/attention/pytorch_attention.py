#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention (flash backend) on the shapes attention_bench times.

Forward and backward timed separately with CUDA events, median of --repeats, TFLOP/s with
FlashAttention's convention (forward 4*B*H*T^2*D, halved when causal; backward 2.5x the forward),
as bench/attention/attention_bench.cpp counts them. Run both in one GPU job:

  build/bench/attention/attention_bench sublet_attention.json
  python3 bench/attention/pytorch_attention.py --out torch_attention.json --sublet sublet_attention.json

With --sublet, the table ends with sublet's fused kernel's time over PyTorch's.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def elapsed_ms(fn):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--full", action="store_true", help="no causal mask")
    parser.add_argument("--out", default="torch_attention.json")
    parser.add_argument("--sublet", help="attention_bench's JSON, for the ratio")
    args = parser.parse_args()
    causal = not args.full
    torch.manual_seed(1)
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    forward_flops = 4.0 * args.batch * args.heads * args.seq * args.seq * args.head_dim * (0.5 if causal else 1.0)
    backward_flops = 2.5 * forward_flops

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        def forward():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        out = forward()

        def backward():
            torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

        for _ in range(3):
            forward()
            backward()
        torch.cuda.synchronize()
        f = [elapsed_ms(forward) for _ in range(args.repeats)]
        b = [elapsed_ms(backward) for _ in range(args.repeats)]
    fwd, bwd = statistics.median(f), statistics.median(b)
    total = fwd + bwd
    row = {"name": "pytorch sdpa flash bf16", "forward_ms": fwd, "backward_ms": bwd, "total_ms": total,
           "forward_tflops": forward_flops / (fwd * 1e9), "backward_tflops": backward_flops / (bwd * 1e9),
           "total_tflops": (forward_flops + backward_flops) / (total * 1e9)}
    device = torch.cuda.get_device_name()
    print(f"PyTorch {torch.__version__} SDPA flash, B={args.batch} H={args.heads} T={args.seq} D={args.head_dim} "
          f"{'causal' if causal else 'full'} on {device} (median of {args.repeats})")
    print(f"{'path':<24} {'fwd ms':>10} {'bwd ms':>10} {'total ms':>10} {'fwd TF/s':>9} {'bwd TF/s':>9} {'tot TF/s':>9}")
    print(f"{row['name']:<24} {fwd:10.3f} {bwd:10.3f} {total:10.3f} {row['forward_tflops']:9.1f} "
          f"{row['backward_tflops']:9.1f} {row['total_tflops']:9.1f}")
    result = {"device": device, "torch": torch.__version__,
              "shape": {"batch": args.batch, "heads": args.heads, "seq": args.seq, "head_dim": args.head_dim,
                        "causal": causal},
              "repeats": args.repeats, "rows": [row]}
    if args.sublet:
        with open(args.sublet) as f:
            sublet = json.load(f)
        fused = next(r for r in sublet["rows"] if "fused" in r["name"])
        ratio = fused["total_ms"] / total
        print(f"sublet fused bf16 forward+backward takes {ratio:.2f}x PyTorch flash's time "
              f"(forward {fused['forward_ms'] / fwd:.2f}x, backward {fused['backward_ms'] / bwd:.2f}x)")
        result["sublet_time_over_pytorch"] = {"total": ratio, "forward": fused["forward_ms"] / fwd,
                                              "backward": fused["backward_ms"] / bwd}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
