#!/usr/bin/env python3
"""Checks the source tree's layering claims (docs/architecture.md, "The floors") from its
#include "..." lines and environment reads. Fails (exit status 1) naming each offence when:
  - a folder includes a folder on its own floor or above it (FLOORS below), or models/
    includes memory/;
  - top-level folders include each other in a cycle, or subfolders of one folder do (the
    folders of one library, LIBRARY_FOLDERS below, count as one);
  - a file of one library (sublet_<name>, LIBRARIES below) includes a header of a library it does
    not link, directly or through the libraries it links; or the libraries link in a cycle;
  - with --link-graph FILE (written by CMake at configure time: build/sublet_link_graph.txt,
    as ctest's CheckLayers passes it), CMake's links between the libraries differ from LIBRARIES;
  - a file includes a sublet header that does not exist (one that moved);
  - a CMake list links a library by a bare name (core, runtime, ...) instead of sublet::<name>;
  - a file outside READS_ENVIRONMENT calls getenv or reads environ;
  - a file under NO_SWITCH_NAMES names one of the SUBLET_* switches of core/switch_table.cpp
    (the launcher, runtime/distributed/launch_env.*, excepted);
  - a SUBLET_* environment variable is read anywhere in the tree (C++ getenv, Python os.environ,
    a shell script's $VAR) but is not listed in core/switch_table.cpp, so `sublet config` and the
    unknown-name warning would not know it.
Python 3 standard library only. Usage: scripts/check_layers.py [SOURCE_ROOT] [--link-graph FILE]
"""
import os
import re
import sys

# Each folder may include only folders on a lower floor (its own subfolders aside).
FLOORS = {
    "core": 0,
    "memory": 1,
    "analysis": 2,
    "ops": 2,
    "runtime": 3,
    "models": 4,
    "train": 5,
    "profile": 5,
    "torch_allocator": 6,
    "bench": 7,
    "examples": 7,
    "cli": 8,
    "fuzz": 9,
    "tests": 9,
}
FORBIDDEN = {("models", "memory"): "models/ builds networks from runtime/ only (runtime/ gives what it needs)"}
# The libraries (CMake targets sublet_<name>, made by sublet_add_library) and the libraries each
# links directly. A file may include the headers of its own library and of every library reachable
# from it here. Programs (cli/, bench/, examples/, fuzz/, tests/, torch_allocator/) are checked by
# their floors only.
LIBRARIES = {
    "core": [],
    "memory": ["core"],
    "analysis": ["memory", "core"],
    "ops": ["memory"],
    "tensor": ["ops", "memory"],
    "nn": ["tensor"],
    "optim": ["tensor"],
    "amp": ["optim", "tensor"],
    "io": ["tensor"],
    "data": ["io", "tensor"],
    "step": ["optim", "tensor", "analysis", "memory"],
    "distributed": ["core"],
    "data_parallel": ["distributed", "tensor"],
    "runtime": ["tensor", "nn", "optim", "amp", "io", "data", "step"],  # an interface over them
    "models": ["runtime"],
    "training": ["models", "runtime", "analysis", "distributed", "data_parallel"],
    "profiling": ["runtime", "memory", "analysis"],
}
# Which library a file belongs to: the longest matching folder (or file-name prefix) wins.
LIBRARY_OF_PATH = {
    "core/": "core",
    "memory/": "memory",
    "analysis/": "analysis",
    "ops/": "ops",
    "runtime/*": "tensor",           # runtime/'s own files: Tensor, Storage, the tensor ops, autocast
    "runtime/autograd/": "tensor",   # see LIBRARY_FOLDERS
    "runtime/nn/": "nn",
    "runtime/optim/": "optim",
    "runtime/amp/": "amp",
    "runtime/io/": "io",
    "runtime/data/": "data",
    "runtime/step/": "step",
    "runtime/distributed/": "distributed",
    "runtime/distributed/data_parallel": "data_parallel",
    "runtime/distributed/process_group": "data_parallel",
    "runtime/distributed/gloo_process_group": "data_parallel",
    "runtime/distributed/gloo_library": "data_parallel",
    "runtime/distributed/gloo_cuda_staging": "data_parallel",
    "runtime/distributed/gloo_shim_abi": "data_parallel",
    "runtime/distributed/gloo_shim.cpp": None,  # libsublet_gloo.so, the one file that links libgloo
    "runtime/distributed/nccl_": "data_parallel",
    "runtime/distributed/communication_stream": "data_parallel",
    "models/": "models",
    "train/": "training",
    "profile/": "profiling",
    "profile/nvtx_capture/": None,  # an injection library for Nsight's NVTX, on core only
}
# The top folders whose every file belongs to a library (or is mapped to None above).
LIBRARY_FOLDERS_TOP = {"core", "memory", "analysis", "ops", "runtime", "models", "train", "profile"}
# Subfolders that make one library, and may include each other: a Tensor's ops record autograd
# nodes, and the nodes hold Tensors (one library, as PyTorch's Tensor and Variable became one).
LIBRARY_FOLDERS = {("runtime", "(root)"): "tensor", ("runtime", "autograd"): "tensor"}
# The files that may read the process environment, and the folders whose files all may.
READS_ENVIRONMENT_FILES = {
    "core/tuning.cpp",  # the runtime switches, read once into TuningOptions
    "core/switch_report.cpp",  # the names set, for `sublet config`'s warnings
    "memory/config.cpp",  # the allocator configuration (SUBLET_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF)
    "runtime/distributed/launch_env.cpp",  # the launcher's variables (RANK, ..., SUBLET_STORE_TOKEN)
    "runtime/distributed/worker_launcher.cpp",  # passes the environment on to the workers
}
READS_ENVIRONMENT_FOLDERS = {"cli", "tests", "bench", "fuzz", "examples"}
NO_SWITCH_NAMES = {"ops", "runtime", "models", "train", "profile"}
SWITCH_NAMES_ALLOWED = {"runtime/distributed/launch_env.h", "runtime/distributed/launch_env.cpp"}

SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
ENVIRONMENT_READ = re.compile(r"\b(?:secure_)?getenv\s*\(|\benviron\b")


def source_files(root):
    for top in sorted(FLOORS):
        for folder, subfolders, files in os.walk(os.path.join(root, top)):
            subfolders.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, root).replace(os.sep, "/"), path


def switch_names(root):
    with open(os.path.join(root, "core/switch_table.cpp"), encoding="utf-8") as f:
        table = f.read()
    with open(os.path.join(root, "core/switch_table.h"), encoding="utf-8") as f:
        header = f.read()
    return set(re.findall(r'"(SUBLET_[A-Z0-9_]+)"', table + header))


# Reads of SUBLET_* environment variables outside the C++ floors (CMake's ${SUBLET_...} are
# variables, not the environment, so CMake files are not scanned).
VARIABLE_READS = {
    (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"): re.compile(r'getenv\(\s*"(SUBLET_[A-Z0-9_]+)"'),
    (".py",): re.compile(r'environ(?:\.get)?[\(\[]\s*"(SUBLET_[A-Z0-9_]+)"|\b[A-Z_]*ENV[A-Z_]*\s*=\s*"(SUBLET_[A-Z0-9_]+)"'),
    (".sh", "run"): re.compile(r'\$\{?(SUBLET_[A-Z0-9_]+)'),
}
VARIABLE_FOLDERS = ("tests", "bench", "python", "scripts", "cli", "examples", "fuzz", "torch_allocator", ".ci")


def unlisted_variable_reads(root, names):
    """(file, name) for each SUBLET_* variable read somewhere but missing from the switch table."""
    folders = sorted(FLOORS) + list(VARIABLE_FOLDERS)
    seen = set()
    for top in folders:
        for folder, subfolders, files in os.walk(os.path.join(root, top)):
            subfolders[:] = sorted(d for d in subfolders if d not in ("__pycache__", "build"))
            for file_name in sorted(files):
                pattern = next((p for suffixes, p in VARIABLE_READS.items() if file_name.endswith(suffixes)), None)
                if pattern is None:
                    continue
                path = os.path.join(folder, file_name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for match in pattern.finditer(text):
                    name = next(g for g in match.groups() if g)
                    if name not in names and name not in seen:
                        seen.add(name)
                        yield os.path.relpath(path, root).replace(os.sep, "/"), name


def find_cycle(edges):
    """A cycle in the directed graph `edges` (node -> set of nodes) as a list, or None."""
    state = {}
    stack = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def library_of(rel):
    """The library a file belongs to (LIBRARY_OF_PATH; None for programs, tests and the files
    mapped to None), and whether some entry matched."""
    best = None
    for prefix in LIBRARY_OF_PATH:
        if prefix.endswith("/*"):
            matches = rel.startswith(prefix[:-1]) and "/" not in rel[len(prefix) - 1:]
        else:
            matches = rel.startswith(prefix)
        if matches and (best is None or len(prefix.rstrip("*")) > len(best.rstrip("*"))):
            best = prefix
    return (LIBRARY_OF_PATH[best], True) if best is not None else (None, False)


def reachable(graph, start):
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


CMAKE_COMMAND = re.compile(r"\b(target_link_libraries|sublet_add_test|sublet_fuzz_target)\s*\(")


def bare_library_links(root):
    """(file:line, name) for each link to a sublet library by its bare name in the CMake lists."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and not d.startswith("build"))
        for name in sorted(files):
            if name != "CMakeLists.txt" and not name.endswith(".cmake"):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, encoding="utf-8", errors="replace") as f:
                text = "".join(line.split("#", 1)[0] + "\n" for line in f)  # comments out
            for m in CMAKE_COMMAND.finditer(text):
                depth, end = 1, m.end()
                while end < len(text) and depth:
                    depth += {"(": 1, ")": -1}.get(text[end], 0)
                    end += 1
                args = text[m.end():end - 1].split()
                if m.group(1) == "sublet_add_test":
                    args = args[args.index("LIBS") + 1:] if "LIBS" in args else []
                else:
                    args = args[1:]  # the target being linked
                for arg in args:
                    if arg in LIBRARIES:
                        line = text.count("\n", 0, m.start()) + 1
                        found.append((f"{rel}:{line}", arg))
    return found


def read_link_graph(path):
    """CMake's links between the libraries: lines 'sublet_<name>: sublet_<dep> ...'."""
    graph = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if ":" not in line:
                continue
            name, deps = line.split(":", 1)
            strip = lambda t: t[len("sublet_"):] if t.startswith("sublet_") else t
            graph[strip(name.strip())] = [strip(d) for d in deps.split()]
    return graph


def main():
    args = sys.argv[1:]
    link_graph_file = None
    if "--link-graph" in args:
        at = args.index("--link-graph")
        if at + 1 >= len(args):
            print("check_layers: --link-graph needs a file (build/sublet_link_graph.txt)", file=sys.stderr)
            return 2
        link_graph_file = args[at + 1]
        del args[at:at + 2]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    names = switch_names(root)
    errors = []
    top_edges = {}
    sub_edges = {}  # top folder -> {subfolder (or library) -> set of subfolders (or libraries)}
    example = {}
    reach = {library: reachable(LIBRARIES, library) for library in LIBRARIES}
    for library, deps in LIBRARIES.items():
        for dep in deps:
            if dep not in LIBRARIES:
                errors.append(f"LIBRARIES: {library} links {dep}, which is not in LIBRARIES")
    for rel, path in source_files(root):
        top = rel.split("/")[0]
        library, mapped = library_of(rel)
        if top in LIBRARY_FOLDERS_TOP and not mapped:
            errors.append(f"{rel}: belongs to no library; name its folder in LIBRARY_OF_PATH (scripts/check_layers.py)")
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for line_number, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            target_top = target.split("/")[0]
            if target_top not in FLOORS:
                continue  # a file of the same folder, a generated or third-party header
            where = f"{rel}:{line_number}: includes {target}"
            if not os.path.isfile(os.path.join(root, target)):
                errors.append(f"{where}, which is not in the source tree (a moved header? CHANGELOG.md lists the moves)")
                continue
            target_library = library_of(target)[0]
            if library and target_library and target_library != library and target_library not in reach[library]:
                errors.append(f"{where}: sublet_{library} does not link sublet_{target_library} "
                              f"(it links {', '.join('sublet_' + d for d in LIBRARIES[library]) or 'nothing of sublet'}); "
                              "link it in CMake and in LIBRARIES, or move the code to the floor where it belongs")
            if target_top != top:
                top_edges.setdefault(top, set()).add(target_top)
                example.setdefault((top, target_top), where)
                if (top, target_top) in FORBIDDEN:
                    errors.append(f"{where}: {FORBIDDEN[(top, target_top)]}")
                elif FLOORS[target_top] >= FLOORS[top]:
                    errors.append(f"{where}: {top}/ (floor {FLOORS[top]}) may include only lower floors, "
                                  f"and {target_top}/ is floor {FLOORS[target_top]}")
            else:
                source_sub = rel.split("/")[1] if rel.count("/") >= 2 else "(root)"
                target_sub = target.split("/")[1] if target.count("/") >= 2 else "(root)"
                source_sub = LIBRARY_FOLDERS.get((top, source_sub), source_sub)
                target_sub = LIBRARY_FOLDERS.get((top, target_sub), target_sub)
                if source_sub != target_sub:
                    sub_edges.setdefault(top, {}).setdefault(source_sub, set()).add(target_sub)
                    example.setdefault((f"{top}/{source_sub}", f"{top}/{target_sub}"), where)
        if ENVIRONMENT_READ.search(text) and rel not in READS_ENVIRONMENT_FILES and top not in READS_ENVIRONMENT_FOLDERS:
            errors.append(f"{rel}: reads the environment; runtime switches go through core/tuning.h "
                          "(see docs/configuration.md)")
        if top in NO_SWITCH_NAMES and rel not in SWITCH_NAMES_ALLOWED:
            for name in sorted(n for n in names if re.search(r"\b" + n + r"\b", text)):
                errors.append(f"{rel}: names the switch {name}; read it through core/tuning.h instead")

    for where, name in unlisted_variable_reads(root, names):
        errors.append(f"{where}: reads the environment variable {name}, which core/switch_table.cpp does not list "
                      "(add it with its scope and one line of documentation, and to docs/configuration.md)")

    for where, name in bare_library_links(root):
        errors.append(f"{where}: links {name}; the library is sublet::{name} (a bare name is taken for a system library)")

    cycle = find_cycle(top_edges)
    if cycle:
        steps = [example[(a, b)] for a, b in zip(cycle, cycle[1:])]
        errors.append("include cycle between folders: " + " -> ".join(cycle) + "\n    " + "\n    ".join(steps))
    for top, edges in sorted(sub_edges.items()):
        cycle = find_cycle(edges)
        if cycle:
            steps = [example[(f"{top}/{a}", f"{top}/{b}")] for a, b in zip(cycle, cycle[1:])]
            errors.append(f"include cycle between {top}/'s subfolders: " + " -> ".join(cycle) + "\n    " + "\n    ".join(steps))
    cycle = find_cycle({library: set(deps) for library, deps in LIBRARIES.items()})
    if cycle:
        errors.append("the libraries link in a cycle: " + " -> ".join("sublet_" + c for c in cycle))

    if link_graph_file:
        cmake = read_link_graph(link_graph_file)
        for library in sorted(set(cmake) | set(LIBRARIES)):
            declared, built = set(LIBRARIES.get(library, ())), set(cmake.get(library, ()))
            if library not in cmake:
                errors.append(f"{link_graph_file}: no library sublet_{library}, which LIBRARIES names")
            elif library not in LIBRARIES:
                errors.append(f"{link_graph_file}: sublet_{library} is not in LIBRARIES (scripts/check_layers.py)")
            elif declared != built:
                errors.append(f"{link_graph_file}: sublet_{library} links {sorted(built)} in CMake, "
                              f"LIBRARIES says {sorted(declared)}")

    for error in errors:
        print(f"check_layers: {error}", file=sys.stderr)
    if errors:
        print(f"check_layers: {len(errors)} problem(s); the floors are in docs/architecture.md", file=sys.stderr)
        return 1
    checked = "libraries against CMake's links, " if link_graph_file else ""
    print(f"check_layers: floors, folder cycles, {checked}library includes, environment reads and "
          f"switch names OK ({len(LIBRARIES)} libraries, {len(names)} switches)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
