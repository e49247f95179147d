#!/usr/bin/env python3
"""Writes the pickle fixtures of tests/analysis/test_pickle_reader.cpp and
test_pytorch_snapshot.cpp with Python's own pickle module, so the reader is checked against
what CPython writes, not against sublet's idea of it. Run from anywhere; the files land beside
this script. Deterministic: rerunning gives the same bytes (gzip with mtime 0)."""
import gzip
import os
import pickle

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def plain_values(protocol):
    """Every kind of plain data, with the edges of each integer opcode and a memo-shared list."""
    shared = [1, 2]
    value = {
        "none": None, "true": True, "false": False,
        "small": 7, "byte": 255, "short": 65535, "int32_min": -2**31, "int32_max": 2**31 - 1,
        "int64": 2**62 + 5, "int64_min": -2**63, "uint64_max": 2**64 - 1, "big": 2**100, "huge": 2**2100,
        "float": 1.5, "neg_float": -0.1, "inf": float("inf"),
        "str": "hello", "unicode": "gr\u00f6\u00dfe \u2211 \U0001F680", "long_str": "x" * 300, "empty_str": "",
        "list": [1, 2, 3], "empty_list": [], "one_item": ["only"],
        "tuple1": (1,), "tuple2": (1, "a"), "tuple3": (1, 2, 3), "tuple4": (1, 2, 3, 4), "empty_tuple": (),
        "nested": {"a": [{"b": (1, [2])}]},
        "shared": [shared, shared],
        "many": list(range(2001)),
        "bigdict": {str(i): i for i in range(1001)},
        "int_keys": {1: "one", 2: "two"},
    }
    if protocol >= 3:  # protocol 2 writes bytes as a call of _codecs.encode
        value["bytes"] = b"\x00\x01\xff"
        value["long_bytes"] = bytes(range(256)) * 2
    if protocol >= 5:
        value["bytearray"] = bytearray(b"ab")
    return value


FRAMES = [{"name": "forward", "filename": "model.py", "line": 12}]
SMALL = 0x7F0000000000
LARGE = 0x7F0000200000
LARGE2 = 0x7F0002000000


def entry(action, addr, size, stream=0, t=[0]):
    t[0] += 10
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": 1700000000000000 + t[0],
            "frames": FRAMES}


def device0_trace():
    return [
        entry("segment_alloc", SMALL, 2 * MiB),
        entry("alloc", SMALL, 1000),
        entry("alloc", SMALL + 1024, 4096),
        entry("free_requested", SMALL, 1000),
        entry("free_completed", SMALL, 1000),
        entry("segment_alloc", LARGE, 20 * MiB),
        entry("alloc", LARGE, 5 * MiB),
        entry("free_requested", LARGE, 5 * MiB),      # used on another stream: completes later
        entry("alloc", SMALL + 5120, 512, stream=7),
        entry("free_completed", LARGE, 5 * MiB),
        entry("free_requested", SMALL + 1024, 4096),
        entry("free_completed", SMALL + 1024, 4096),
        entry("free_requested", SMALL + 5120, 512, stream=7),
        entry("free_completed", SMALL + 5120, 512, stream=7),
        entry("segment_free", LARGE, 20 * MiB),       # torch.cuda.empty_cache()
        entry("snapshot", 0, 0),
        entry("alloc", SMALL, 2048),
        entry("free_requested", SMALL, 2048),
        entry("free_completed", SMALL, 2048),
        entry("segment_free", SMALL, 2 * MiB),        # released inside the next allocation
        entry("segment_alloc", LARGE2, 26 * MiB),
        entry("alloc", LARGE2, 25 * MiB),
        entry("free_requested", LARGE2, 25 * MiB),
        entry("free_completed", LARGE2, 25 * MiB),
    ]


def device1_trace():
    base = 0x7E0000000000
    return [entry("segment_alloc", base, 2 * MiB, stream=3), entry("alloc", base, 100, stream=3),
            entry("free_requested", base, 100, stream=3), entry("free_completed", base, 100, stream=3)]


def settings(conf, max_split, expandable, divisions):
    return {"PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": max_split, "garbage_collection_threshold": 0.0,
            "expandable_segments": expandable, "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): divisions for i in range(16)}}


def segment(address, total, blocks):
    """A "segments" entry as torch.cuda.memory._snapshot() writes it (Module.cpp segmentInfoToDict)."""
    out = []
    for addr, size, requested, state in blocks:
        out.append({"address": addr, "size": size, "requested_size": requested, "state": state, "frames": []})
    return {"device": 0, "address": address, "total_size": total, "allocated_size": 0, "active_size": 0,
            "requested_size": 0, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": [], "blocks": out}


def snapshot(traces, allocator_settings=None):
    s = {"segments": [segment(LARGE2, 26 * MiB, [(LARGE2, 26 * MiB, 0, "inactive")])], "device_traces": traces}
    if allocator_settings is not None:
        s["allocator_settings"] = allocator_settings
        s["external_annotations"] = []
    return s


def main():
    for protocol in (2, 3, 4, 5):
        write(f"values_p{protocol}.pickle", pickle.dumps(plain_values(protocol), protocol=protocol))

    # pickle.dump's default protocol (4 before Python 3.14), as _dump_snapshot writes it.
    conf = settings("max_split_size_mb:256,roundup_power2_divisions:4", 256 * MiB, False, 4)
    snap = pickle.dumps(snapshot([device0_trace(), device1_trace()], conf), protocol=4)
    write("snapshot.pickle", snap)
    write("snapshot.pickle.gz", gzip.compress(snap, mtime=0))
    # The ring buffer kept only the newest entries: the history starts at a free.
    write("snapshot_overflowed.pickle", pickle.dumps(snapshot([device0_trace()[3:]], conf), protocol=4))
    # PyTorch 2.0's layout: no allocator_settings, no external_annotations.
    write("snapshot_no_settings.pickle", pickle.dumps(snapshot([device0_trace()]), protocol=2))
    # Expandable segments: pages mapped and unmapped; unlimited max_split_size is written as -1.
    base = 0x7D0000000000
    expandable = [entry("segment_map", base, 20 * MiB), entry("alloc", base, MiB), entry("alloc", base + MiB, 3 * MiB),
                  entry("free_requested", base, MiB), entry("free_completed", base, MiB),
                  entry("segment_unmap", base + 20 * MiB, 20 * MiB),  # never mapped: not from an empty allocator
                  ]
    write("snapshot_expandable.pickle",
          pickle.dumps(snapshot([expandable[:5]], settings("expandable_segments:True", -1, True, 0)), protocol=4))
    write("snapshot_unmapped_unknown.pickle",
          pickle.dumps(snapshot([expandable], settings("expandable_segments:True", -1, True, 0)), protocol=4))


if __name__ == "__main__":
    main()
