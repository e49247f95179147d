#!/usr/bin/env python3
"""Per-range table of a sublet NVTX capture (libsublet_nvtx_capture.so's JSON), in the layout of
`nsys stats --report nvtx_sum`: one row per range name, sorted by total time.

  python3 profile/nvtx_capture/nvtx_sum.py ranges.json [--skip-steps N] [--json rows.json]

--skip-steps N leaves out everything that starts before the (N+1)-th "model forward" range (the
warm-up steps of `sublet bench step`, which on a GPU include cuDNN's algorithm search).
Ranges never ended are not in the table; the footer counts them. Times are the host's, as in
nsys's nvtx_sum: on a GPU a range lasts while its kernels are launched (plus any wait inside it),
not while they run; the kernels' own times need ncu or Nsight Systems' GPU projection.
"""
import argparse
import json
import statistics
import sys


def load_ranges(path, skip_steps, step_range):
    with open(path, encoding="utf-8") as f:
        capture = json.load(f)
    if capture.get("format") != "sublet-nvtx-capture":
        sys.exit(f"nvtx_sum: {path} is not a sublet-nvtx-capture file (format: {capture.get('format')!r})")
    ranges = sorted(capture["ranges"], key=lambda r: r["start_ns"])
    if skip_steps > 0:
        step_starts = [r["start_ns"] for r in ranges if r["name"] == step_range]
        if len(step_starts) <= skip_steps:
            sys.exit(f"nvtx_sum: --skip-steps {skip_steps} needs more than {skip_steps} '{step_range}' ranges, "
                     f"{path} has {len(step_starts)}")
        ranges = [r for r in ranges if r["start_ns"] >= step_starts[skip_steps]]
    return capture, ranges


def summarize(ranges):
    durations = {}
    styles = {}
    for r in ranges:
        if r["end_ns"] is None:
            continue
        durations.setdefault(r["name"], []).append(r["end_ns"] - r["start_ns"])
        styles[r["name"]] = "PushPop" if r["kind"] == "push_pop" else "StartEnd"
    grand_total = sum(sum(d) for d in durations.values())
    rows = []
    for name, d in durations.items():
        total = sum(d)
        rows.append({
            "range": name, "style": styles[name], "instances": len(d), "total_ms": total / 1e6,
            "avg_ms": total / len(d) / 1e6, "med_ms": statistics.median(d) / 1e6, "min_ms": min(d) / 1e6,
            "max_ms": max(d) / 1e6, "stddev_ms": (statistics.stdev(d) if len(d) > 1 else 0.0) / 1e6,
            "time_percent": 100.0 * total / grand_total if grand_total > 0 else 0.0,
        })
    rows.sort(key=lambda row: (-row["total_ms"], row["range"]))
    return rows


def print_table(rows, out):
    header = ["Time (%)", "Total Time (ms)", "Instances", "Avg (ms)", "Med (ms)", "Min (ms)", "Max (ms)",
              "StdDev (ms)", "Style", "Range"]
    lines = [[f"{r['time_percent']:.1f}", f"{r['total_ms']:.3f}", str(r["instances"]), f"{r['avg_ms']:.3f}",
              f"{r['med_ms']:.3f}", f"{r['min_ms']:.3f}", f"{r['max_ms']:.3f}", f"{r['stddev_ms']:.3f}",
              r["style"], r["range"]] for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.rjust(w) if i < 8 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    print(fmt(header).rstrip(), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for line in lines:
        print(fmt(line).rstrip(), file=out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", help="the JSON file SUBLET_NVTX_CAPTURE named")
    parser.add_argument("--skip-steps", type=int, default=0, help="leave out the first N steps (warm-up)")
    parser.add_argument("--step-range", default="model forward", help="the range that starts each step")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    args = parser.parse_args()
    capture, ranges = load_ranges(args.capture, args.skip_steps, args.step_range)
    rows = summarize(ranges)
    print_table(rows, sys.stdout)
    open_ranges = sum(1 for r in ranges if r["end_ns"] is None)
    print(f"\n{len(ranges)} ranges ({open_ranges} never ended, {capture['unmatched_ends']} ends without a start) "
          f"in {len(rows)} names; pid {capture['pid']}"
          + (f"; first {args.skip_steps} step(s) left out" if args.skip_steps else ""))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"format": "sublet-nvtx-sum", "capture": args.capture, "skip_steps": args.skip_steps,
                       "never_ended": open_ranges, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
