#!/usr/bin/env python3
"""Prints the A/B table of bench/ab_compare.sh: for every bench alloc cell and bench step run, the
median over rounds of A (old binary) and B (new binary), and B/A. Usage: ab_table.py OUT_DIR"""
import glob
import json
import os
import re
import statistics
import sys


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main(out):
    alloc = {}  # (row label, allocator) -> side -> [median ns]
    for path in sorted(glob.glob(os.path.join(out, "alloc_[AB]_*.json"))):
        side = re.search(r"alloc_([AB])_", path).group(1)
        with open(path) as f:
            doc = json.load(f)
        for row in doc["rows"]:
            for cell in row["results"]:
                alloc.setdefault((row["label"], cell["allocator"]), {}).setdefault(side, []).append(cell["median_ns_per_pair"])
    step = {}  # name -> side -> [ms, peak allocated, peak reserved]
    for path in sorted(glob.glob(os.path.join(out, "step_*_[AB]_*.json"))):
        name, side = re.search(r"step_(.+)_([AB])_\d+\.json$", path).groups()
        with open(path) as f:
            doc = json.load(f)
        doc = doc[0] if isinstance(doc, list) else doc
        step.setdefault(name, {}).setdefault(side, []).append(
            (doc["ms_per_step"], doc["peak_allocated_bytes"], doc["peak_reserved_bytes"]))

    print(f"{'bench alloc cell':<44} {'A ns':>10} {'B ns':>10} {'B/A':>7}")
    for (label, allocator), sides in alloc.items():
        a, b = median_or_none(sides.get("A", [])), median_or_none(sides.get("B", []))
        ratio = f"{b / a:.3f}" if a and b else "-"
        cell = lambda v: f"{v:>10.1f}" if v is not None else f"{'-':>10}"
        print(f"{label + ' / ' + allocator:<44} {cell(a)} {cell(b)} {ratio:>7}")
    print()
    print(f"{'bench step':<18} {'A ms':>8} {'B ms':>8} {'B/A':>7} {'A alloc/res MiB':>18} {'B alloc/res MiB':>18}")
    for name, sides in step.items():
        def summary(runs):
            if not runs:
                return None, "-"
            ms = statistics.median(r[0] for r in runs)
            return ms, f"{runs[0][1] / 2**20:.1f}/{runs[0][2] / 2**20:.1f}"
        a, a_mem = summary(sides.get("A", []))
        b, b_mem = summary(sides.get("B", []))
        ratio = f"{b / a:.3f}" if a and b else "-"
        print(f"{name:<18} {a if a is not None else '-':>8.2f} {b if b is not None else '-':>8.2f} {ratio:>7} {a_mem:>18} {b_mem:>18}"
              if a is not None and b is not None else f"{name:<18} {'-':>8} {'-':>8} {ratio:>7} {a_mem:>18} {b_mem:>18}")


if __name__ == "__main__":
    main(sys.argv[1])
