#!/usr/bin/env python3
"""Writes a synthetic sublet-alloc-trace of N events (allocs and frees of 512 B to 24 MiB, at
most ~200 live, a fixed seed), for measuring `sublet replay` on long traces.
Usage: gen_alloc_trace.py N PATH"""
import random
import sys


def write_trace(events, path):
    rng = random.Random(1)
    sizes = [512, 4096, 65536, 1 << 20, 3 << 20, 8 << 20, 24 << 20]
    live, next_id, written, lines = [], 1, 0, []
    with open(path, "w") as out:
        out.write('{"format":"sublet-alloc-trace","version":2,"events":[\n')
        separator = ""
        while written < events or live:
            if written >= events or (live and (len(live) > 200 or rng.random() < 0.5)):
                i = rng.randrange(len(live))
                live[i], live[-1] = live[-1], live[i]
                lines.append('{"action":"free","id":%d}' % live.pop())
            else:
                size = rng.choice(sizes) + rng.randrange(512)
                lines.append('{"action":"alloc","id":%d,"size":%d,"stream":0,"category":"activation"}' % (next_id, size))
                live.append(next_id)
                next_id += 1
            written += 1
            if len(lines) >= 100000:
                out.write(separator + ",\n".join(lines))
                separator, lines = ",\n", []
        if lines:
            out.write(separator + ",\n".join(lines))
        out.write("\n]}\n")


if __name__ == "__main__":
    write_trace(int(sys.argv[1]), sys.argv[2])
