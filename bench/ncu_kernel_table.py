#!/usr/bin/env python3
"""Where a training step's GPU time goes, kernel by kernel: reads the CSV that
    ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
        PROGRAM ... --profile-range
prints (for `sublet bench step` or bench/pytorch_step.py, which mark their timed steps) and prints the
kernels grouped by name (count, total and mean microseconds, share of the step) and by family
(convolution, batch norm, element-wise, ...), and writes them as JSON. ncu runs kernels one at a
time, so the total is the step's kernel time without overlap, not its wall time.

    python3 bench/ncu_kernel_table.py NCU_CSV [--label NAME] [--steps N] [--top K] [--json PATH]
"""
import argparse
import collections
import csv
import io
import json
import re
import sys

FAMILIES = [  # first match wins; the patterns are lower-case substrings or regexes of kernel names
    ("attention", r"sdpa|flash_(forward|backward|fprop|bprop)|dot_do_o|convert_dq|write_grad_query|row_dot"),
    ("convolution", r"conv|xmma|implicit_gemm|cudnn|sm90_xmma|dgrad|wgrad|fprop|cutlass"),
    ("matmul", r"gemm|cublas|sm90_"),
    ("optimizer", r"sgd|adam|optim|multi_tensor|update"),
    ("layer norm", r"layer_norm|layernorm"),
    ("batch norm", r"batch_norm|batchnorm|bn_|welford|norm_"),
    ("pooling", r"pool"),
    ("loss / softmax", r"softmax|nll|cross_entropy|loss"),
    ("cast / copy", r"copy|cast|convert|transpose|fill"),
    ("reduction", r"reduce|sum"),
    ("element-wise", r"elementwise|vectorized|unrolled|binary|unary|ternary|relu|add|mul"),
]


def family(name):
    lower = name.lower()
    for label, pattern in FAMILIES:
        if re.search(pattern, lower):
            return label
    return "other"


def read_rows(path):
    text = open(path, errors="replace").read()
    lines = [line for line in text.splitlines() if line.startswith('"')]
    if not lines:
        sys.exit(f"error: {path}: no CSV rows (was ncu run with --csv --page raw, and did the program mark its steps?)")
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    rows = []
    for row in reader:
        value = row.get("gpu__time_duration.sum", "")
        try:
            ns = float(value.replace(",", ""))
        except ValueError:
            continue  # the units row
        rows.append((row.get("Kernel Name", "?"), ns))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv")
    parser.add_argument("--label", default="")
    parser.add_argument("--steps", type=int, default=1, help="profiled steps (totals are divided by it)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = read_rows(args.csv)
    by_name = collections.defaultdict(lambda: [0, 0.0])
    by_family = collections.defaultdict(lambda: [0, 0.0])
    for name, ns in rows:
        by_name[name][0] += 1
        by_name[name][1] += ns
        by_family[family(name)][0] += 1
        by_family[family(name)][1] += ns
    total = sum(ns for _, ns in rows) / args.steps
    print(f"{args.label}: {len(rows) // args.steps} kernels, {total / 1e3:.1f} us of kernel time per step")
    print(f"{'family':<16} {'kernels':>8} {'us/step':>10} {'share':>7}")
    for label, (count, ns) in sorted(by_family.items(), key=lambda kv: -kv[1][1]):
        print(f"{label:<16} {count // args.steps:>8} {ns / args.steps / 1e3:>10.1f} {100 * ns / args.steps / total:>6.1f}%")
    print(f"\n{'us/step':>9} {'count':>6} {'mean us':>8}  kernel")
    for name, (count, ns) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"{ns / args.steps / 1e3:>9.1f} {count // args.steps:>6} {ns / count / 1e3:>8.1f}  {name[:110]}")
    if args.json:
        json.dump({"label": args.label, "kernels_per_step": len(rows) // args.steps, "kernel_us_per_step": total / 1e3,
                   "families": {k: {"kernels": c // args.steps, "us_per_step": ns / args.steps / 1e3}
                                for k, (c, ns) in by_family.items()},
                   "kernels": [{"name": n, "count": c // args.steps, "us_per_step": ns / args.steps / 1e3}
                               for n, (c, ns) in sorted(by_name.items(), key=lambda kv: -kv[1][1])]},
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
