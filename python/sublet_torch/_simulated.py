"""Simulated devices for machines without a GPU (tests, CI, what-if runs): the library's allocators
serve fake addresses from a device of the given capacity, with the real caching rules and statistics.
SUBLET_TORCH_SIMULATE="COUNTxSIZE" (e.g. "1x8GiB") makes sublet_torch.use() set them up instead of
installing the allocator into PyTorch; memory is then taken with caching_allocator_alloc().
"""
import os
import re

ENV_SIMULATE = "SUBLET_TORCH_SIMULATE"
_UNITS = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}
_FORMAT = re.compile(r"^\s*([0-9]+)\s*x\s*([0-9]+)\s*([A-Za-z]*)\s*$")


def parse(text, origin=ENV_SIMULATE):
    """(count, capacity_bytes) from "COUNTxSIZE"; ValueError saying what was expected."""
    match = _FORMAT.match(text)
    unit = match.group(3).upper() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError("%s=%r: expected COUNTxSIZE, e.g. 1x8GiB or 2x512MiB (units B, KiB, MiB, GiB, TiB)"
                         % (origin, text))
    count, capacity = int(match.group(1)), int(match.group(2)) * _UNITS[unit]
    if count < 1 or capacity < 1:
        raise ValueError("%s=%r: expected COUNTxSIZE with a positive count and size" % (origin, text))
    return count, capacity


def from_environment():
    """(count, capacity_bytes) when SUBLET_TORCH_SIMULATE is set, else None."""
    text = os.environ.get(ENV_SIMULATE, "")
    return parse(text) if text.strip() else None
