#!/usr/bin/env python3
"""Table and goals of the mixed-precision GPU rows, from `SUITE=amp bench/gpu_step_suite.sh OUT_DIR`
(sublet eager and CUDA graph, PyTorch eager and CUDA graph, each config in one job):
  ResNet-50 224 bs64 and bs256, bf16 + channels-last: sublet's best img/s >= 1.15x PyTorch eager's
  and >= 1.0x PyTorch graph's; that run's peak allocated <= PyTorch eager's; its peak reserved
  <= 1.02x its peak allocated. fp16 rows beside them, held to the same goals.
  ResNet-18 32x32 bs128 fp32 + channels-last, CUDA graph: <= 0.7x PyTorch's CUDA-graph step time.

    python3 bench/gpu_amp_table.py OUT_DIR
"""
import json
import os
import sys

MIB = 2 ** 20
RUNS = ("sublet_eager", "sublet_graph", "pytorch", "pytorch_graph")
R50 = [("r50_b64_bf16_cl", "R50 224 bs64 bf16 CL"), ("r50_b256_bf16_cl", "R50 224 bs256 bf16 CL"),
       ("r50_b64_fp16_cl", "R50 224 bs64 fp16 CL"), ("r50_b256_fp16_cl", "R50 224 bs256 fp16 CL")]
R18 = ("r18_b128_fp32_cl", "R18 32 bs128 fp32 CL")


def load(out, tag, run):
    path = os.path.join(out, f"{tag}_{run}.json")
    return json.load(open(path)) if os.path.exists(path) else None


def get(run, key):
    return None if run is None else run.get(key)


def ratio(a, b):
    return None if a is None or not b else a / b


def fmt(value, spec):
    if value is None:
        return "n/a".rjust(int("".join(c for c in spec.split(".")[0] if c.isdigit()) or 0))
    return format(value, spec)


def print_rows(out, configs):
    print(f"{'config':<24} {'run':<14} {'ms/step':>9} {'img/s':>9} {'peak alloc':>11} {'peak resv':>10}"
          f" {'resv/alloc':>10} {'img/s vs torch':>14}")
    for tag, title in configs:
        runs = {name: load(out, tag, name) for name in RUNS}
        torch_ips = get(runs["pytorch"], "img_per_s")
        for name, run in runs.items():
            alloc, resv = get(run, "peak_allocated_bytes"), get(run, "peak_reserved_bytes")
            print(f"{title:<24} {name:<14} {fmt(get(run, 'ms_per_step'), '9.2f')} {fmt(get(run, 'img_per_s'), '9.0f')}"
                  f" {fmt(alloc and alloc / MIB, '9.0f') + ' M':>11} {fmt(resv and resv / MIB, '8.0f') + ' M':>10}"
                  f" {fmt(ratio(resv, alloc), '10.3f')} {fmt(ratio(get(run, 'img_per_s'), torch_ips), '14.2f')}")


def goals(out):
    """(text, value, limit, higher_is_better) for every goal; value None when a run is missing."""
    rows = []
    for tag, title in R50:
        runs = {name: load(out, tag, name) for name in RUNS}
        candidates = [r for r in (runs["sublet_eager"], runs["sublet_graph"]) if get(r, "img_per_s")]
        best = max(candidates, key=lambda r: r["img_per_s"]) if candidates else None
        rows.append((f"{title}: best img/s vs torch eager", ratio(get(best, "img_per_s"),
                                                               get(runs["pytorch"], "img_per_s")), 1.15, True))
        rows.append((f"{title}: best img/s vs torch graph", ratio(get(best, "img_per_s"),
                                                               get(runs["pytorch_graph"], "img_per_s")), 1.0, True))
        rows.append((f"{title}: peak alloc vs torch eager", ratio(get(best, "peak_allocated_bytes"),
                                                               get(runs["pytorch"], "peak_allocated_bytes")), 1.0, False))
        rows.append((f"{title}: reserved / allocated", ratio(get(best, "peak_reserved_bytes"),
                                                          get(best, "peak_allocated_bytes")), 1.02, False))
    tag, title = R18
    rows.append((f"{title}: graph ms vs torch graph", ratio(get(load(out, tag, "sublet_graph"), "ms_per_step"),
                                                          get(load(out, tag, "pytorch_graph"), "ms_per_step")), 0.7, False))
    return rows


def main(out):
    print_rows(out, R50 + [R18])
    print()
    print("goals (best = sublet's faster of eager and graph):")
    for text, value, limit, higher in goals(out):
        met = None if value is None else (value >= limit if higher else value <= limit)
        state = "n/a" if met is None else ("met" if met else "MISSED")
        print(f"  {text:<48} {fmt(value, '6.3f')}  ({'>=' if higher else '<='} {limit})  {state}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gpu_amp_table.py OUT_DIR")
    main(sys.argv[1])
