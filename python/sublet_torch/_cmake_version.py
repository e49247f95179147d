"""The package's version: CMake's `project(sublet VERSION ...)`, the project's one source of truth.

The package build (setup.py) reads it from the checkout's CMakeLists.txt and writes it into the
installed package as _version.py; run from a checkout (PYTHONPATH=python), it is read from there.
"""
import os
import re

_PROJECT = re.compile(r"project\(\s*sublet\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", re.IGNORECASE)


def read(cmakelists):
    """The version in `cmakelists` (a path to the top CMakeLists.txt); ValueError when it has none."""
    with open(cmakelists, encoding="utf-8") as f:
        match = _PROJECT.search(f.read())
    if match is None:
        raise ValueError("%s has no `project(sublet VERSION x.y.z)`" % cmakelists)
    return match.group(1)


def package_version():
    """The installed package's version, else the checkout's; None when neither is there."""
    try:
        from ._version import VERSION  # written by the package build
        return VERSION
    except ImportError:
        pass
    cmakelists = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "CMakeLists.txt")
    return read(cmakelists) if os.path.isfile(cmakelists) else None
