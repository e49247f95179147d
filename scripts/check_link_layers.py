#!/usr/bin/env python3
"""Checks the built libraries against the layering of scripts/check_layers.py (LIBRARIES): every
symbol a library's objects need from another sublet library must come from one it links,
directly or through the libraries it links. Includes can look right while a library calls a
function declared in its own header but defined a floor above (a cycle the static linker would
not refuse); this finds those. Weak and template symbols (defined wherever they are used) are
ignored. Usage: scripts/check_link_layers.py BUILD_DIR  (after the libraries are built; needs nm)
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import LIBRARIES, reachable  # noqa: E402

STRONG = set("TDBR")  # text, data, bss, read-only data: one definition per program


def archives(build_dir):
    found = {}
    for folder, _, files in os.walk(build_dir):
        for name in files:
            if name.startswith("libsublet_") and name.endswith(".a"):
                library = name[len("libsublet_"):-len(".a")]
                if library in LIBRARIES:
                    found[library] = os.path.join(folder, name)
    return found


def symbols(archive):
    """(defined strong symbols, undefined symbols) of an archive's objects."""
    out = subprocess.run(["nm", "-g", "--format=posix", archive], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2 or parts[0].endswith(":") or line.endswith(":"):
            continue  # an archive member's name
        name, kind = parts[0], parts[1]
        if kind in STRONG:
            defined.add(name)
        elif kind == "U":
            undefined.add(name)
    return defined, undefined - defined


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), check=True, capture_output=True, text=True).stdout
        return out.split("\n")[:len(names)]
    except (OSError, subprocess.CalledProcessError):
        return names


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = archives(sys.argv[1])
    if not found:
        print(f"check_link_layers: no libsublet_*.a under {sys.argv[1]}; build the libraries first", file=sys.stderr)
        return 1
    table = {library: symbols(path) for library, path in sorted(found.items())}
    owner = {}
    for library, (defined, _) in table.items():
        for name in defined:
            owner.setdefault(name, set()).add(library)
    problems = {}
    for library, (_, undefined) in table.items():
        allowed = reachable(LIBRARIES, library)
        for name in undefined:
            owners = owner.get(name, set())
            if len(owners) == 1:
                (source,) = owners
                if source != library and source not in allowed:
                    problems.setdefault((library, source), []).append(name)
    for (library, source), names in sorted(problems.items()):
        shown = "; ".join(demangle(sorted(names)[:3]))
        print(f"check_link_layers: libsublet_{library}.a needs {len(names)} symbol(s) of libsublet_{source}.a, "
              f"which it does not link, e.g. {shown}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_link_layers: {len(table)} libraries need symbols only of the libraries they link")
    return 0


if __name__ == "__main__":
    sys.exit(main())
