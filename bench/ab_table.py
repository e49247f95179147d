#!/usr/bin/env python3
"""Prints the A/B table of bench/ab_compare.sh: for every bench alloc cell (all allocators) and
bench step run, the median of A (old binary) and B (new binary) over their rounds, and B/A.
Usage: ab_table.py OUT_DIR"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_tables import load_ab  # noqa: E402


def cell(value, width, digits):
    return f"{value:>{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def main(out):
    alloc, steps = load_ab(out)
    print(f"{'bench alloc cell':<44} {'A ns':>10} {'B ns':>10} {'B/A':>7}")
    for (label, allocator), sides in alloc.items():
        a = statistics.median(sides["A"]) if "A" in sides else None
        b = statistics.median(sides["B"]) if "B" in sides else None
        ratio = f"{b / a:.3f}" if a and b else "-"
        print(f"{label + ' / ' + allocator:<44} {cell(a, 10, 1)} {cell(b, 10, 1)} {ratio:>7}")
    print()
    print(f"{'bench step':<18} {'A ms':>8} {'B ms':>8} {'B/A':>7} {'A alloc/res MiB':>18} {'B alloc/res MiB':>18}")
    for name, sides in steps.items():
        def summary(runs):
            if not runs:
                return None, "-"
            return (statistics.median(r["ms_per_step"] for r in runs),
                    f"{runs[0]['peak_allocated_bytes'] / 2**20:.1f}/{runs[0]['peak_reserved_bytes'] / 2**20:.1f}")
        a, a_mem = summary(sides.get("A", []))
        b, b_mem = summary(sides.get("B", []))
        ratio = f"{b / a:.3f}" if a and b else "-"
        print(f"{name:<18} {cell(a, 8, 2)} {cell(b, 8, 2)} {ratio:>7} {a_mem:>18} {b_mem:>18}")


if __name__ == "__main__":
    main(sys.argv[1])
