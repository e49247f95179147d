"""python/sublet_torch's ctypes layer over the real libsublet_torch_allocator.so, on simulated
devices (no GPU, no PyTorch needed). Run by ctest (SubletTorchPython), which sets
SUBLET_TORCH_ALLOCATOR_LIBRARY to the built library; directly:
    SUBLET_TORCH_ALLOCATOR_LIBRARY=build/torch_allocator/libsublet_torch_allocator.so \
        python3 tests/torch_allocator/test_sublet_torch.py -v
"""
import collections
import io
import os
import pickle
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import sublet_torch  # noqa: E402
from sublet_torch import _library  # noqa: E402

MiB = 1 << 20
CAPACITY = 1024 * MiB


def setUpModule():
    if not os.environ.get(sublet_torch.ENV_LIBRARY):
        raise unittest.SkipTest("%s is not set (ctest sets it to the built library)" % sublet_torch.ENV_LIBRARY)
    os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    sublet_torch.load(conf="expandable_segments:True,roundup_power2_divisions:4")
    sublet_torch._use_simulated_devices(1, CAPACITY)


def lib():
    return _library.loaded()


def malloc(size, stream=None):
    ptr = lib().sublet_torch_try_malloc(size, 0, stream)
    if not ptr:
        raise MemoryError(_library.last_error(lib()))
    return ptr


def free(ptr, stream=None):
    lib().sublet_torch_free(ptr, 0, 0, stream)


class SubletTorchTest(unittest.TestCase):
    def test_allocations_show_in_the_statistics(self):
        before = sublet_torch.memory_allocated()
        ptr = malloc(1000)
        self.assertEqual(sublet_torch.memory_allocated() - before, 1024)  # 512-byte rounding
        self.assertGreaterEqual(sublet_torch.memory_reserved(), sublet_torch.memory_allocated())
        self.assertGreaterEqual(sublet_torch.max_memory_allocated(), sublet_torch.memory_allocated())
        self.assertGreaterEqual(sublet_torch.max_memory_reserved(), sublet_torch.memory_reserved())
        live = sublet_torch.live_allocations(0)
        self.assertEqual(live["block_bytes"], sublet_torch.memory_allocated())
        self.assertEqual(live["requested_bytes"], sublet_torch.memory_stats()["requested_bytes.all.current"])
        free(ptr)
        self.assertEqual(sublet_torch.memory_allocated(), before)

    def test_memory_stats_has_pytorchs_keys_in_order(self):
        stats = sublet_torch.memory_stats(0)
        self.assertIsInstance(stats, collections.OrderedDict)
        self.assertEqual(list(stats), sorted(stats))
        for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                    "reserved_bytes.all.peak", "active_bytes.all.current", "requested_bytes.all.current",
                    "allocation.all.current", "segment.large_pool.peak", "num_alloc_retries", "num_device_alloc",
                    "num_device_free", "num_ooms", "max_split_size"):
            self.assertIn(key, stats)
            self.assertIsInstance(stats[key], int)
        # The same device named the ways PyTorch users do.
        self.assertEqual(sublet_torch.memory_stats("cuda:0")["num_ooms"], stats["num_ooms"])

    def test_conf_reaches_the_allocator(self):
        ptr = malloc(10)  # the allocator exists from here on
        conf, backend = sublet_torch.allocator_config(0)
        free(ptr)
        self.assertIn("expandable_segments:True", conf)
        self.assertIn("roundup_power2_divisions:[2:4,", conf)  # the canonical form of "4"
        self.assertEqual(backend, "simulated")
        with self.assertRaises(RuntimeError):
            sublet_torch.load(conf="expandable_segments:False")  # too late: allocators exist

    def test_summary_peak_reset_and_empty_cache(self):
        ptr = malloc(64 * MiB)
        free(ptr)
        self.assertGreaterEqual(sublet_torch.max_memory_allocated(), 64 * MiB)
        self.assertIn("Allocated memory", sublet_torch.memory_summary())
        sublet_torch.reset_peak_memory_stats()
        self.assertEqual(sublet_torch.max_memory_allocated(), sublet_torch.memory_allocated())
        sublet_torch.empty_cache()
        self.assertEqual(sublet_torch.memory_reserved(), sublet_torch.memory_allocated())

    def test_errors_are_python_exceptions(self):
        with self.assertRaises(RuntimeError) as caught:
            sublet_torch.set_per_process_memory_fraction(2.0, 0)
        self.assertIn("fraction", str(caught.exception))
        with self.assertRaises(RuntimeError):
            lib_error = lib().sublet_torch_record_stream(12345, None)
            _library.check(lib(), lib_error)
        with self.assertRaises(MemoryError):
            malloc(2 * CAPACITY)
        self.assertIn("out of memory", _library.last_error(lib()))
        with self.assertRaises(ValueError):
            sublet_torch.memory_allocated("cpu")

    def test_dump_snapshot_is_a_pytorch_snapshot(self):
        sublet_torch.empty_cache()
        sublet_torch.record_memory_history(True)
        a = malloc(3000)
        b = malloc(5 * MiB)
        free(a)
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "snap.pickle")
            sublet_torch.dump_snapshot(path)
            with open(path, "rb") as f:
                snap = pickle.load(f)
        free(b)
        sublet_torch.record_memory_history(False)
        self.assertEqual(set(snap), {"segments", "device_traces", "allocator_settings", "external_annotations"})
        for segment in snap["segments"]:
            for key in ("device", "address", "total_size", "allocated_size", "active_size", "stream", "segment_type",
                        "blocks"):
                self.assertIn(key, segment)
            for block in segment["blocks"]:
                self.assertEqual({"size", "requested_size", "state", "address"} - set(block), set())
        allocated = sum(block["size"] for s in snap["segments"] for block in s["blocks"]
                        if block["state"] == "active_allocated")
        self.assertEqual(allocated, 5 * MiB)
        trace = snap["device_traces"][0]
        allocs = [e["size"] for e in trace if e["action"] == "alloc"]
        self.assertEqual(allocs, [3000, 5 * MiB])
        self.assertIn("free_completed", [e["action"] for e in trace])
        for entry in trace:
            self.assertEqual({"action", "addr", "size", "stream"} - set(entry), set())
        self.assertTrue(snap["allocator_settings"]["expandable_segments"])

    def test_memory_monitor_as_context_manager_and_decorator(self):
        out = io.StringIO()
        with sublet_torch.MemoryMonitor("block", file=out) as monitor:
            kept = malloc(2 * MiB)
            scratch = malloc(8 * MiB)
            free(scratch)
        self.assertEqual(monitor.last["allocated_delta"], 2 * MiB)
        self.assertEqual(monitor.last["peak_over_start"], 10 * MiB)
        self.assertIn("[memory] block: peak", out.getvalue())

        decorator = sublet_torch.MemoryMonitor(file=out)

        @decorator
        def step(size):
            ptr = malloc(size)
            free(ptr)
            return size

        self.assertEqual(step(4 * MiB), 4 * MiB)
        self.assertEqual(step.__name__, "step")
        self.assertEqual(decorator.last["peak_over_start"], 4 * MiB)
        self.assertEqual(decorator.last["allocated_delta"], 0)
        self.assertEqual(len(decorator.records), 1)
        self.assertIn("step", out.getvalue())
        free(kept)

    def test_use_without_torch_says_so(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            with self.assertRaises(ImportError) as caught:
                sublet_torch.use()
            self.assertIn("needs PyTorch", str(caught.exception))
        else:
            self.skipTest("PyTorch is installed here: use() would try to install the allocator")

    def test_missing_library_is_named(self):
        with self.assertRaises(FileNotFoundError) as caught:
            sublet_torch.find_library("/nonexistent/libsublet_torch_allocator.so")
        self.assertIn("build_torch_allocator.sh", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
