#!/usr/bin/env python3
"""Checks the source tree's layering claims (docs/architecture.md, "The floors") from its
#include "..." lines and environment reads. Fails (exit status 1) naming each offence when:
  - a folder includes a folder on its own floor or above it (FLOORS below), or models/
    includes memory/;
  - top-level folders include each other in a cycle; or subfolders of one folder do (runtime/
    excepted, reported only, until it is split into libraries along its seams);
  - a file outside READS_ENVIRONMENT calls getenv or reads environ;
  - a file under NO_SWITCH_NAMES names one of the SUBLET_* switches of core/switch_table.cpp
    (the launcher, runtime/distributed/launch_env.*, excepted).
Python 3 standard library only. Usage: scripts/check_layers.py [SOURCE_ROOT]
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
# Folders whose subfolders may still include each other in a cycle: reported, not failed.
SUBFOLDER_CYCLES_REPORTED_ONLY = {"runtime"}
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


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    names = switch_names(root)
    errors, notes = [], []
    top_edges = {}
    sub_edges = {}  # top folder -> {subfolder -> set of subfolders}
    example = {}
    for rel, path in source_files(root):
        top = rel.split("/")[0]
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
                if source_sub != target_sub:
                    sub_edges.setdefault(top, {}).setdefault(source_sub, set()).add(target_sub)
                    example.setdefault((f"{top}/{source_sub}", f"{top}/{target_sub}"), where)
        if ENVIRONMENT_READ.search(text) and rel not in READS_ENVIRONMENT_FILES and top not in READS_ENVIRONMENT_FOLDERS:
            errors.append(f"{rel}: reads the environment; runtime switches go through core/tuning.h "
                          "(see docs/configuration.md)")
        if top in NO_SWITCH_NAMES and rel not in SWITCH_NAMES_ALLOWED:
            for name in sorted(n for n in names if re.search(r"\b" + n + r"\b", text)):
                errors.append(f"{rel}: names the switch {name}; read it through core/tuning.h instead")

    cycle = find_cycle(top_edges)
    if cycle:
        steps = [example[(a, b)] for a, b in zip(cycle, cycle[1:])]
        errors.append("include cycle between folders: " + " -> ".join(cycle) + "\n    " + "\n    ".join(steps))
    for top, edges in sorted(sub_edges.items()):
        cycle = find_cycle(edges)
        if not cycle:
            continue
        steps = [example[(f"{top}/{a}", f"{top}/{b}")] for a, b in zip(cycle, cycle[1:])]
        text = f"include cycle between {top}/'s subfolders: " + " -> ".join(cycle) + "\n    " + "\n    ".join(steps)
        (notes if top in SUBFOLDER_CYCLES_REPORTED_ONLY else errors).append(text)

    for note in notes:
        print(f"check_layers: note (not yet enforced): {note}")
    for error in errors:
        print(f"check_layers: {error}", file=sys.stderr)
    if errors:
        print(f"check_layers: {len(errors)} problem(s); the floors are in docs/architecture.md", file=sys.stderr)
        return 1
    print(f"check_layers: floors, folder cycles, environment reads and switch names OK ({len(names)} switches)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
