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
COMMENTED_FOLDERS = ("core", "memory", "analysis", "ops", "runtime", "models", "train", "profile", "cli",
                     "bench", "examples", "torch_allocator", "python", "fuzz", "tests", "scripts", "cmake", ".ci")
SLASH_COMMENTED = (".cpp", ".h", ".hpp", ".c", ".cu", ".cuh")
HASH_COMMENTED = (".sh", ".cmake", ".cmake.in", ".py")


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


def starts_with_digit(text, i):
    """Whether the word that ends just before text[i] is a number."""
    start = i
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
        start -= 1
    return start < i and text[start].isdigit()


def slash_comments(text):
    """(line number, text) of every // and /* */ comment of C++ or CUDA source, skipping string and
    character literals (raw strings included)."""
    comments, i, line, n = [], 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            comments.append((line, text[i:end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for offset, part in enumerate(text[i:end].split("\n")):
                comments.append((line + offset, part))
            line += text.count("\n", i, end)
            i = end
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)  # R"delimiter( ... )delimiter"
            closing = ")" + text[i + 2:open_paren] + '"'
            close = text.find(closing, open_paren) if open_paren >= 0 else -1
            end = n if close < 0 else close + len(closing)
            line += text.count("\n", i, end)
            i = end
        elif c == "'" and starts_with_digit(text, i):
            i += 1  # a digit separator: 10'000
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return comments


def hash_comments(text):
    """(line number, text) of every # comment of a shell, CMake or Python file, and of Python's
    triple-quoted strings (its docstrings). Quotes are followed within a line only."""
    comments, in_triple = [], None
    for number, line in enumerate(text.split("\n"), start=1):
        if in_triple:
            comments.append((number, line))
            if in_triple in line:
                in_triple = None
            continue
        quote, i = None, 0
        while i < len(line):
            c = line[i]
            if quote is None and line.startswith(('"""', "'''"), i):
                closing = line.find(line[i:i + 3], i + 3)
                comments.append((number, line[i:] if closing < 0 else line[i:closing + 3]))
                if closing < 0:
                    in_triple = line[i:i + 3]
                    break
                i = closing + 3
            elif quote is None and c == "#" and (i == 0 or line[i - 1] in " \t;(" ):
                comments.append((number, line[i:]))
                break
            elif quote is None and c in "\"'":
                quote = c
                i += 1
            elif quote is not None and c == "\\":
                i += 2
            elif c == quote:
                quote = None
                i += 1
            else:
                i += 1
    return comments


def source_comments(path, text):
    name = os.path.basename(path)
    if name.endswith(SLASH_COMMENTED):
        return slash_comments(text)
    if name.endswith(HASH_COMMENTED) or name == "CMakeLists.txt" or text.startswith("#!"):
        return hash_comments(text)
    return []


def comment_findings(root):
    findings = []
    paths = [os.path.join(root, "CMakeLists.txt")]
    for folder in COMMENTED_FOLDERS:
        for directory, subdirectories, files in os.walk(os.path.join(root, folder)):
            subdirectories[:] = sorted(d for d in subdirectories
                                       if os.path.relpath(os.path.join(directory, d), root) != os.path.join("bench", "results")
                                       and d != "__pycache__")
            paths.extend(os.path.join(directory, f) for f in sorted(files))
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue  # binary test data, fuzz corpora
        for number, comment in source_comments(path, text):
            for match in COMMENT_HISTORY.finditer(comment):
                findings.append(f"{os.path.relpath(path, root)}:{number}: '{match.group(0)}' in a comment: say what "
                                "it stands for instead")
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
