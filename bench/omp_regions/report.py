#!/usr/bin/env python3
"""Table of bench/omp_regions/region_shim.c's records: per function that opens an OpenMP region,
per step: calls, wall ms, CPU ms of all threads, serial gap before it, and the two losses of a
region against a perfect split of its CPU time over its threads:
  wait      = wall - max thread CPU (threads not running: woken late, sleeping in a barrier
              while another works, or descheduled by another process)
  imbalance = max thread CPU - mean thread CPU (one thread had more work)
usage: report.py RECORDS BINARY STEPS"""
import bisect
import collections
import os
import subprocess
import sys


def symbols(path):
    table = []
    listing = subprocess.run(["nm", "-C", "--defined-only", path], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            table.append((int(parts[0], 16), parts[2]))
    table.sort()
    return table


def main():
    records, binary, steps = sys.argv[1], sys.argv[2], float(sys.argv[3])
    tables = {}

    def name_of(offset, obj):
        path = binary if obj in ("?", "") or os.path.realpath(obj) == os.path.realpath(binary) else obj
        if path not in tables:
            tables[path] = symbols(path) if os.path.exists(path) else []
        table = tables[path]
        i = bisect.bisect_right([a for a, _ in table], offset) - 1
        full = table[i][1] if i >= 0 else f"{obj}+{offset:x}"
        # The function without its arguments, namespaces and return type.
        name = full.replace("(anonymous namespace)::", "").split("(")[0].replace("sublet::ops::cpu::", "")
        return name[len("void "):] if name.startswith("void ") else name

    rows = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0, 0.0])
    for line in open(records):
        fields = line.split()
        offset, obj, wall, gap, threads = int(fields[0], 16), fields[1], float(fields[2]), float(fields[3]), int(fields[4])
        cpu = [float(x) for x in fields[5:5 + threads]] or [0.0]
        row = rows[name_of(offset, obj)]
        row[0] += 1
        row[1] += wall
        row[2] += sum(cpu)
        row[3] += gap
        row[4] += wall - max(cpu)
        row[5] += max(cpu) - sum(cpu) / len(cpu)
    print(f"{'function opening the region':58s} {'calls':>6s} {'wall':>7s} {'cpu':>7s} {'gap':>6s} {'wait':>6s} {'imbal':>6s}   (ms per step)")
    total = [0.0] * 6
    for name, row in sorted(rows.items(), key=lambda item: -item[1][1]):
        print(f"{name[:58]:58s} {row[0] / steps:6.1f} " + " ".join(f"{x / steps:{w}.2f}" for x, w in zip(row[1:], (7, 7, 6, 6, 6))))
        total = [a + b for a, b in zip(total, row)]
    print(f"{'all regions':58s} {total[0] / steps:6.1f} " + " ".join(f"{x / steps:{w}.2f}" for x, w in zip(total[1:], (7, 7, 6, 6, 6))))


if __name__ == "__main__":
    main()
