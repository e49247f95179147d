"""Python stacks for the allocation history (record_memory_history(stacks="python")).

While on, the library calls back into Python at every allocation, before taking any of its
locks; the callback names the caller's stack (innermost frame first) and the library stamps the
block and its history event with it, so that snapshots show where each tensor was allocated, as
torch.cuda.memory._record_memory_history(stacks="python") does. ctypes takes the GIL for the call,
as PyTorch's own stack capture does. Allocations from threads that run no Python have no frames.
"""
import atexit
import ctypes
import sys

_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_uint32)
_state = {"lib": None, "callback": None, "ids": {}, "atexit": False, "on": False}


def _clean(text):
    return text.replace("\t", " ").replace("\n", " ")


def _capture():
    try:
        frame = sys._getframe(2)  # 0: _capture, 1: _on_allocation, 2: the code that allocated
    except ValueError:  # no Python frame: a thread of PyTorch's own
        return 0
    lines = []
    while frame is not None:
        code = frame.f_code
        lines.append("%s\t%d\t%s" % (_clean(code.co_filename), frame.f_lineno or 0, _clean(code.co_name)))
        frame = frame.f_back
    text = "\n".join(lines)
    ids = _state["ids"]
    frames_id = ids.get(text)
    if frames_id is None:
        frames_id = _state["lib"].sublet_torch_intern_frames(text.encode("utf-8", "replace"))
        ids[text] = frames_id
    return frames_id


def _on_allocation():
    try:
        return _capture()
    except BaseException:  # nothing may cross back into C: the allocation goes on without frames
        return 0


def enable(lib):
    if _state["callback"] is None:
        _state["callback"] = _CALLBACK(_on_allocation)  # kept alive as long as the library may call it
    _state["lib"] = lib
    lib.sublet_torch_set_frames_callback(_state["callback"])
    _state["on"] = True
    if not _state["atexit"]:
        # Allocations during interpreter shutdown must not call into a Python that is going away.
        atexit.register(disable)
        _state["atexit"] = True


def disable():
    if _state["lib"] is not None:
        _state["lib"].sublet_torch_set_frames_callback(None)
    _state["on"] = False


def enabled():
    return _state["on"]
