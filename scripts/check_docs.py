#!/usr/bin/env python3
"""The user documentation describes the product, not how it was built.

Checks, exiting 1 with every finding:
  - README.md is at most 15 KiB;
  - README.md and docs/**/*.md hold no development-history words (issue or session numbers, names
    of work branches, device-call numbers), and no commit hashes outside generated blocks (their
    stamps name the commit a figure came from);
  - the string literals of the program's sources (what sublet prints) hold no history words;
  - the comments of the source tree (C++, CUDA, CMake, shell, Python; not bench/results/) name no
    issue or session numbers: a comment says what the code does and why, in words.

    scripts/check_docs.py [ROOT]
"""
import glob
import os
import re
import sys

from source_comments import source_comments

README_LIMIT_BYTES = 15 * 1024
HISTORY = re.compile(
    r"\bissues? #?\d+|(?<=[\s(])#\d{1,3}\b|\bsessions? \d+|\bsession's\b|\bhelpers?\b|"
    r"\bwork(ing)? branch(es)?\b|\b(bn-cluster|bn-counter|im2col-fast|cudnn-nhwc-bn)\b|\bcall \d+\b",
    re.IGNORECASE)
# A commit hash: 7 to 40 hex digits with at least one digit and one letter, not a 0x number.
HASH = re.compile(r"(?<![0-9A-Za-z_x/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
GENERATED = re.compile(r"<!-- begin generated: (\S+) from \S+ -->\n.*?<!-- end generated: \1 -->", re.S)
# Example values in quoted error messages that look like hashes (crc32 checksums).
HASH_ALLOWED_CONTEXT = re.compile(r"crc32", re.IGNORECASE)
PROGRAM_SOURCES = ("cli", "bench", "train", "profile", "runtime", "models", "memory", "ops")
STRING_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
COMMENT_HISTORY = re.compile(r"\bissues?[ -]#?\d+|\bsessions? \d+\b", re.IGNORECASE)
# The folders whose comments are checked (bench/results/ holds run outputs, not source).
COMMENTED_FOLDERS = ("core", "memory", "analysis", "ops", "runtime", "models", "train", "profile", "cli", "bench",
                     "examples", "torch_allocator", "python", "fuzz", "tests", "scripts", "cmake", ".ci")


def document_findings(root):
    findings = []
    documents = ["README.md"] + sorted(os.path.relpath(p, root) for p in
                                      glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
    for document in documents:
        with open(os.path.join(root, document), encoding="utf-8") as f:
            text = f.read()
        outside_blocks = GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for number, (line, plain) in enumerate(zip(text.split("\n"), outside_blocks.split("\n")), start=1):
            for match in HISTORY.finditer(line):
                findings.append(f"{document}:{number}: history word '{match.group(0)}'")
            if not HASH_ALLOWED_CONTEXT.search(plain):
                for match in HASH.finditer(plain):
                    findings.append(f"{document}:{number}: commit hash '{match.group(0)}' outside a generated block")
    size = os.path.getsize(os.path.join(root, "README.md"))
    if size > README_LIMIT_BYTES:
        findings.append(f"README.md: {size} bytes, more than {README_LIMIT_BYTES}")
    return findings


def program_findings(root):
    findings = []
    for folder in PROGRAM_SOURCES:
        for path in sorted(glob.glob(os.path.join(root, folder, "**", "*.*"), recursive=True)):
            if not path.endswith((".cpp", ".h", ".cu")):
                continue
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, start=1):
                    code = line.split("//", 1)[0] if not line.lstrip().startswith("#include") else ""
                    for literal in STRING_LITERAL.findall(code):
                        for match in HISTORY.finditer(literal):
                            findings.append(f"{os.path.relpath(path, root)}:{number}: history word "
                                            f"'{match.group(0)}' in a message")
    return findings


def comment_findings(root):
    findings = []
    paths = [os.path.join(root, "CMakeLists.txt")]
    results = os.path.join(root, "bench", "results")
    for folder in COMMENTED_FOLDERS:
        for directory, subdirectories, files in os.walk(os.path.join(root, folder)):
            subdirectories[:] = sorted(d for d in subdirectories
                                       if os.path.join(directory, d) != results and d != "__pycache__")
            paths.extend(os.path.join(directory, f) for f in sorted(files))
    for path in paths:
        for number, comment in source_comments(path):
            for match in COMMENT_HISTORY.finditer(comment):
                findings.append(f"{os.path.relpath(path, root)}:{number}: '{match.group(0)}' in a comment; "
                                "say what it stands for instead")
    return findings


def main(argv):
    root = argv[0] if argv else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    findings = document_findings(root) + program_findings(root) + comment_findings(root)
    for finding in findings:
        print(finding, file=sys.stderr)
    if findings:
        print(f"check_docs: {len(findings)} finding(s); user documentation and messages describe the product, "
              "not its development history", file=sys.stderr)
        return 1
    print("check_docs: README size, history words and comments OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
