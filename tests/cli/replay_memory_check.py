#!/usr/bin/env python3
"""`sublet replay` of a long trace must cost at most 100 bytes of resident memory per event (a
trace parsed into one JSON document would cost several times that).
Usage: replay_memory_check.py SUBLET_BINARY [EVENTS]"""
import os
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from gen_alloc_trace import write_trace  # noqa: E402

sublet, events = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
with tempfile.TemporaryDirectory() as work:
    trace = os.path.join(work, "trace.json")
    write_trace(events, trace)  # in this process: the only child is the replay
    result = subprocess.run([sublet, "replay", trace, "--alloc-conf", ""], capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stdout, result.stderr)
        sys.exit(1)
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child: the replay
per_event = peak_kib * 1024 / events
print(f"sublet replay of {events} events: {peak_kib / 1024:.1f} MiB resident at most, {per_event:.1f} bytes per event")
sys.exit(0 if per_event <= 100 else 1)
