"""Which torch hooks use() installs (see build_hooks.py), and installing them."""
import ctypes
import os
import warnings

ENV_HOOKS = "SUBLET_TORCH_HOOKS"


def choose(torch_hooks, torch_version):
    """The hooks library to install, or None for PyTorch's plain pluggable allocator.
    torch_hooks: a path, False (never), or None: $SUBLET_TORCH_HOOKS, else the hooks built into
    this package when they were built for this PyTorch (a warning says what is missing otherwise)."""
    from . import build_hooks  # imported here: `python -m sublet_torch.build_hooks` runs it as __main__
    if torch_hooks is False:
        return None
    if torch_hooks:
        return os.fspath(torch_hooks)
    if os.environ.get(ENV_HOOKS):
        return os.environ[ENV_HOOKS]
    path = build_hooks.default_output()
    built = build_hooks.built_for(path) if os.path.isfile(path) else None
    if built == torch_version:
        return path
    why = ("they were built for torch %s, this is %s" % (built, torch_version) if built
           else "they are not built for this PyTorch")
    warnings.warn("sublet_torch.use(): without the torch hooks (%s): torch.cuda.memory_stats() & co., cuDNN's "
                  "benchmark, torch.cuda.empty_cache() and torch.OutOfMemoryError need them. Build them with "
                  "`python -m sublet_torch.build_hooks`, or pass torch_hooks=False to use PyTorch's plain "
                  "pluggable allocator without this warning" % why, stacklevel=3)
    return None


def install(path, core_library):
    """Makes sublet's allocator PyTorch's through the hooks at `path`; returns the loaded hooks."""
    if not os.path.isfile(path):
        raise FileNotFoundError("sublet_torch: torch hooks %r do not exist (build them with "
                                "`python -m sublet_torch.build_hooks --output %s`)" % (path, path))
    hooks = ctypes.CDLL(os.path.realpath(path))
    hooks.sublet_torch_hooks_install.argtypes = [ctypes.c_char_p]
    hooks.sublet_torch_hooks_install.restype = ctypes.c_int
    hooks.sublet_torch_hooks_last_error.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    hooks.sublet_torch_hooks_last_error.restype = ctypes.c_size_t
    if hooks.sublet_torch_hooks_install(core_library.encode()) != 0:
        buffer = ctypes.create_string_buffer(4096)
        hooks.sublet_torch_hooks_last_error(buffer, len(buffer))
        raise RuntimeError("sublet_torch.use(torch_hooks=%r): %s (call use() before any CUDA tensor)"
                           % (path, buffer.value.decode("utf-8", "replace")))
    return hooks
