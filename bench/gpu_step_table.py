#!/usr/bin/env python3
"""Side-by-side table of bench/gpu_step_suite.sh's JSON files (sublet eager, sublet CUDA graph,
PyTorch eager, PyTorch CUDA graph; allocator comparison), with the ratios the issue's goals are
stated in (against PyTorch eager, as the issue states them; the PyTorch graph rows show the same
step without PyTorch's host overhead):
  ResNet-18 32x32 bs128: eager <= 0.5x and graph <= 0.25x PyTorch's step time;
  ResNet-50 224 bs64: img/s >= PyTorch's; peak allocated <= PyTorch's; peak reserved within 2%
  of peak allocated (default caching allocator).

    python3 bench/gpu_step_table.py OUT_DIR
"""
import json
import os
import sys

CONFIGS = [("r18_b128", "ResNet-18 32x32 bs128"), ("r18_b512", "ResNet-18 32x32 bs512"),
           ("r50_b64", "ResNet-50 224 bs64")]
MIB = 2 ** 20


def load(path):
    if not os.path.exists(path):
        return None
    data = json.load(open(path))
    return data


def fmt(value, spec):
    if value is None:
        width = "".join(c for c in spec.split(".")[0] if c.isdigit())
        return "n/a".rjust(int(width or 0))
    return format(value, spec)


def ratio(a, b):
    return None if a is None or not b else a / b


def get(run, key):
    return None if run is None else run.get(key)


def main(out):
    print(f"{'config':<22} {'run':<13} {'ms/step':>9} {'img/s':>9} {'peak alloc':>11} {'peak resv':>10}"
          f" {'resv/alloc':>10} {'ms vs torch':>11} {'alloc vs torch':>14} {'drv/step':>8}")
    verdicts = []
    graph_vs_graph = []  # sublet's graphed step against PyTorch's graphed step
    for tag, title in CONFIGS:
        runs = {name: load(os.path.join(out, f"{tag}_{name}.json"))
                for name in ("sublet_eager", "sublet_graph", "pytorch", "pytorch_graph")}
        torch = runs["pytorch"]
        for name, run in runs.items():
            ms, alloc, resv = get(run, "ms_per_step"), get(run, "peak_allocated_bytes"), get(run, "peak_reserved_bytes")
            print(f"{title:<22} {name:<13} {fmt(ms, '9.2f')} {fmt(get(run, 'img_per_s'), '9.0f')}"
                  f" {fmt(alloc and alloc / MIB, '9.0f') + ' M':>11} {fmt(resv and resv / MIB, '8.0f') + ' M':>10}"
                  f" {fmt(ratio(resv, alloc), '10.3f')} {fmt(ratio(ms, get(torch, 'ms_per_step')), '11.2f')}"
                  f" {fmt(ratio(alloc, get(torch, 'peak_allocated_bytes')), '14.2f')}"
                  f" {fmt(get(run, 'device_allocs_per_step'), '8.1f')}")
        eager, graph = runs["sublet_eager"], runs["sublet_graph"]
        torch_ms = get(torch, "ms_per_step")
        graph_vs_graph.append((title, ratio(get(graph, "ms_per_step"), get(runs["pytorch_graph"], "ms_per_step"))))
        if tag == "r18_b128":
            verdicts.append(("R18 bs128 eager <= 0.5x torch", ratio(get(eager, "ms_per_step"), torch_ms), 0.5))
            verdicts.append(("R18 bs128 graph <= 0.25x torch", ratio(get(graph, "ms_per_step"), torch_ms), 0.25))
        if tag == "r50_b64":
            best = min([x for x in (get(eager, "ms_per_step"), get(graph, "ms_per_step")) if x] or [None]) \
                if (eager or graph) else None
            verdicts.append(("R50 bs64 best img/s >= torch (ms ratio <= 1)", ratio(best, torch_ms), 1.0))
        verdicts.append((f"{tag} eager peak alloc <= torch",
                         ratio(get(eager, "peak_allocated_bytes"), get(torch, "peak_allocated_bytes")), 1.0))
        verdicts.append((f"{tag} eager reserved <= 1.02x allocated",
                         ratio(get(eager, "peak_reserved_bytes"), get(eager, "peak_allocated_bytes")), 1.02))
    print()
    print(f"{'allocators (sublet eager)':<22} {'allocator':<9} {'ms/step':>9} {'img/s':>9} {'peak alloc':>11}"
          f" {'peak resv':>10} {'drv/step':>9} {'ms vs caching':>13}")
    for tag, title in CONFIGS:
        runs = load(os.path.join(out, f"{tag}_sublet_allocators.json"))
        if runs is None:
            continue
        runs = runs if isinstance(runs, list) else [runs]
        caching = next((r for r in runs if r.get("allocator") == "caching"), None)
        for r in runs:
            print(f"{title:<22} {r.get('allocator', '?'):<9} {r['ms_per_step']:9.2f} {r['img_per_s']:9.0f}"
                  f" {r['peak_allocated_bytes'] / MIB:9.0f} M {r['peak_reserved_bytes'] / MIB:8.0f} M"
                  f" {r.get('device_allocs_per_step', 0):9.1f}"
                  f" {fmt(ratio(r['ms_per_step'], get(caching, 'ms_per_step')), '13.2f')}")
    print()
    print("sublet graph vs PyTorch graph (ms ratio):")
    for title, value in graph_vs_graph:
        print(f"  {title:<22} {fmt(value, '6.3f')}")
    print()
    print("goals:")
    for text, value, limit in verdicts:
        state = "n/a" if value is None else ("met" if value <= limit else "MISSED")
        print(f"  {text:<48} {fmt(value, '6.3f')}  (limit {limit})  {state}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gpu_step_table.py OUT_DIR")
    main(sys.argv[1])
