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
from sublet_torch import _errors, _library, _simulated  # noqa: E402

MiB = 1 << 20
CAPACITY = 1024 * MiB


def setUpModule():
    if not os.environ.get(sublet_torch.ENV_LIBRARY):
        raise unittest.SkipTest("%s is not set (ctest sets it to the built library)" % sublet_torch.ENV_LIBRARY)
    for variable in ("SUBLET_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", sublet_torch.ENV_SIMULATE):
        os.environ.pop(variable, None)
    sublet_torch.load(conf="expandable_segments:True,roundup_power2_divisions:4")
    sublet_torch.use_simulated_devices(1, CAPACITY)


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
        with self.assertRaises(RuntimeError) as caught:
            sublet_torch.load(conf="expandable_segmentz:True")
        self.assertIn("expandable_segmentz", str(caught.exception))
        # The library holds the settings: the package writes no environment variable.
        self.assertNotIn("SUBLET_ALLOC_CONF", os.environ)

    def test_version_is_cmakes(self):
        expected = os.environ.get("SUBLET_PROJECT_VERSION")
        if not expected:
            self.skipTest("SUBLET_PROJECT_VERSION is not set (ctest sets it to CMake's PROJECT_VERSION)")
        self.assertEqual(sublet_torch.__version__, expected)
        self.assertEqual(sublet_torch.library_version(), expected)

    def test_caching_allocator_alloc_and_its_out_of_memory_error(self):
        before = sublet_torch.memory_stats()
        ptr = sublet_torch.caching_allocator_alloc(5 * MiB + 3)
        self.assertEqual(sublet_torch.memory_stats()["requested_bytes.all.current"] - before["requested_bytes.all.current"],
                         5 * MiB + 3)
        with self.assertRaises(_errors.out_of_memory_error()) as caught:
            sublet_torch.caching_allocator_alloc(2 * CAPACITY)
        self.assertIn("out of memory", str(caught.exception))
        self.assertTrue(issubclass(type(caught.exception), RuntimeError))  # as PyTorch's own is
        self.assertEqual(sublet_torch.memory_stats()["num_ooms"], before["num_ooms"] + 1)
        sublet_torch.caching_allocator_delete(ptr)
        self.assertEqual(sublet_torch.memory_allocated(), before["allocated_bytes.all.current"])
        with self.assertRaises(ValueError):
            sublet_torch.caching_allocator_delete(ptr)  # twice

    def test_out_of_memory_error_is_pytorchs_where_it_has_one(self):
        try:
            import torch
        except ImportError:
            self.assertIs(_errors.out_of_memory_error(), RuntimeError)
            return
        expected = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", RuntimeError)
        self.assertIs(_errors.out_of_memory_error(), expected)

    def test_snapshot_frames_are_the_python_stack_of_the_allocation(self):
        sublet_torch.record_memory_history(True)  # stacks="python"

        def allocate_here():
            return sublet_torch.caching_allocator_alloc(3 * MiB), sys._getframe().f_lineno

        ptr, line = allocate_here()
        sublet_torch.record_memory_history(True, stacks=None)
        plain = sublet_torch.caching_allocator_alloc(3 * MiB)
        snap = sublet_torch.snapshot()
        sublet_torch.record_memory_history(False)
        blocks = {b["address"]: b for s in snap["segments"] for b in s["blocks"]}
        frames = blocks[ptr]["frames"]
        self.assertEqual(frames[0]["name"], "caching_allocator_alloc")  # innermost first, as PyTorch's
        self.assertEqual((frames[1]["filename"], frames[1]["line"], frames[1]["name"]),
                         (os.path.abspath(__file__), line, "allocate_here"))
        self.assertEqual(frames[2]["name"], "test_snapshot_frames_are_the_python_stack_of_the_allocation")
        self.assertEqual(blocks[plain]["frames"], [])
        sublet_torch.caching_allocator_delete(ptr)
        sublet_torch.caching_allocator_delete(plain)
        with self.assertRaises(ValueError):
            sublet_torch.record_memory_history(True, stacks="cpp")

    def test_simulate_variable_is_parsed_or_refused_clearly(self):
        self.assertEqual(_simulated.parse("2x512MiB"), (2, 512 * MiB))
        self.assertEqual(_simulated.parse("1x8GiB"), (1, 8 << 30))
        self.assertEqual(_simulated.parse("1x4096"), (1, 4096))
        for bad in ("8GiB", "0x1GiB", "1x8GB", "x", ""):
            with self.assertRaises(ValueError) as caught:
                _simulated.parse(bad)
            self.assertIn("COUNTxSIZE", str(caught.exception))

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

    def test_use_without_a_pluggable_allocator_says_why(self):
        # Here the devices are simulated by use_simulated_devices, not by the environment: use()
        # goes on to PyTorch.
        sublet_torch_module = sys.modules["sublet_torch"]
        saved, sublet_torch_module._simulated_devices = sublet_torch_module._simulated_devices, None
        try:
            try:
                import torch
            except ImportError:
                with self.assertRaises(ImportError) as caught:
                    sublet_torch.use()
                self.assertIn("needs PyTorch", str(caught.exception))
                return
            if hasattr(torch.cuda.memory, "CUDAPluggableAllocator") and torch.cuda.is_available():
                self.skipTest("PyTorch %s can take the allocator here: use() would install it" % torch.__version__)
            with self.assertRaises(RuntimeError) as caught:
                sublet_torch.use()
            self.assertIn(sublet_torch.ENV_SIMULATE, str(caught.exception))  # and says how to go on without a GPU
        finally:
            sublet_torch_module._simulated_devices = saved

    def test_torch_hooks_are_chosen_only_for_the_pytorch_they_were_built_for(self):
        from sublet_torch import _hooks, build_hooks
        self.assertIsNone(_hooks.choose(False, "2.11.0"))
        self.assertEqual(_hooks.choose("/x/hooks.so", "2.11.0"), "/x/hooks.so")
        saved = build_hooks.default_output
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, build_hooks.HOOKS_NAME)
            build_hooks.default_output = lambda: path
            try:
                with self.assertWarns(UserWarning) as caught:
                    self.assertIsNone(_hooks.choose(None, "2.11.0"))
                self.assertIn("python -m sublet_torch.build_hooks", str(caught.warning))
                open(path, "wb").close()
                with open(build_hooks.info_path(path), "w") as f:
                    f.write('{"torch": "2.10.0"}')
                with self.assertWarns(UserWarning) as caught:
                    self.assertIsNone(_hooks.choose(None, "2.11.0"))
                self.assertIn("built for torch 2.10.0", str(caught.warning))
                self.assertEqual(_hooks.choose(None, "2.10.0"), path)
            finally:
                build_hooks.default_output = saved

    def test_building_the_hooks_says_what_is_missing(self):
        from sublet_torch import build_hooks
        try:
            build_hooks.torch_paths()
        except build_hooks.HooksUnavailable as e:
            self.assertTrue(any(word in str(e) for word in ("torch", "PyTorch")), str(e))
        else:
            self.skipTest("this PyTorch can build the hooks")
        with self.assertRaises(build_hooks.HooksUnavailable) as caught:
            build_hooks.build(os.path.join(tempfile.gettempdir(), "never.so"), cxx="/nonexistent/c++")
        self.assertIn("/nonexistent/c++", str(caught.exception))

    def test_missing_library_is_named(self):
        with self.assertRaises(FileNotFoundError) as caught:
            sublet_torch.find_library("/nonexistent/libsublet_torch_allocator.so")
        self.assertIn("pip install", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
