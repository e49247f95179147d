"""MemoryMonitor: the tutorial's memory decorator, for sublet's allocator, also as a context manager.

    @sublet_torch.MemoryMonitor()            # or MemoryMonitor("train_step")
    def train_step(batch): ...

    with sublet_torch.MemoryMonitor("eval") as m:
        ...
    m.last["peak_allocated"]

On entry it resets the device's peak (as the tutorial's torch.cuda.reset_peak_memory_stats() does:
an enclosing monitor's peak then starts over too) and notes allocated and reserved bytes; on exit
it prints one line and appends a record to `records`: peak allocated, allocated and reserved
after, and their changes over the block. With synchronize=True (default, when PyTorch is loaded)
it waits for the device first, so queued frees are done.
"""
import contextlib
import functools
import sys

GiB = float(1 << 30)


class MemoryMonitor(contextlib.ContextDecorator):
    def __init__(self, name=None, device=None, file=None, quiet=False, synchronize=True):
        self.name = name
        self.device = device
        self.file = file
        self.quiet = quiet
        self.synchronize = synchronize
        self.records = []
        self.last = None
        self._start = None

    def __call__(self, function):
        if self.name is None:
            self.name = getattr(function, "__qualname__", getattr(function, "__name__", "block"))
        wrapped = super().__call__(function)
        return functools.wraps(function)(wrapped)

    def _sync(self):
        torch = sys.modules.get("torch")
        if self.synchronize and torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def __enter__(self):
        from . import memory_allocated, memory_reserved, reset_peak_memory_stats
        self._sync()
        reset_peak_memory_stats(self.device)
        self._start = (memory_allocated(self.device), memory_reserved(self.device))
        return self

    def __exit__(self, *exc):
        from . import max_memory_allocated, memory_allocated, memory_reserved
        self._sync()
        allocated, reserved = memory_allocated(self.device), memory_reserved(self.device)
        peak = max_memory_allocated(self.device)
        start_allocated, start_reserved = self._start
        record = {
            "name": self.name or "block",
            "peak_allocated": peak,
            "peak_over_start": peak - start_allocated,
            "allocated": allocated,
            "allocated_delta": allocated - start_allocated,
            "reserved": reserved,
            "reserved_delta": reserved - start_reserved,
        }
        self.records.append(record)
        self.last = record
        if not self.quiet:
            print(self.report(record), file=self.file or sys.stdout)
        return False

    @staticmethod
    def report(record):
        return ("[memory] %s: peak %.2f GiB (+%.2f GiB over the start), allocated %.2f GiB (%+.2f), "
                "reserved %.2f GiB (%+.2f)" % (record["name"], record["peak_allocated"] / GiB,
                                               record["peak_over_start"] / GiB, record["allocated"] / GiB,
                                               record["allocated_delta"] / GiB, record["reserved"] / GiB,
                                               record["reserved_delta"] / GiB))
