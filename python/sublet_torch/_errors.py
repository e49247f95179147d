"""The exception for an allocation that found no memory: PyTorch's torch.OutOfMemoryError
(torch.cuda.OutOfMemoryError before PyTorch 2.5; both subclass RuntimeError), RuntimeError
where PyTorch has neither or is not installed."""
import sys


def out_of_memory_error():
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except Exception:  # no PyTorch, or one that fails to import
            return RuntimeError
    error = getattr(torch, "OutOfMemoryError", None) or getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    return error if isinstance(error, type) and issubclass(error, BaseException) else RuntimeError
