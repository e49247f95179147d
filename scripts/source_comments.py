"""The comments of a source file, for checks over what they say (scripts/check_docs.py).

    source_comments(path) -> [(line number, comment text), ...]

C++ and CUDA: // and /* */ comments, past string, raw-string and character literals and digit
separators. Shell, CMake and Python: # comments, and Python's triple-quoted strings (docstrings).
Other files (data, documents, binaries) have none.
"""
import os

SLASH_COMMENTED = (".cpp", ".h", ".hpp", ".c", ".cu", ".cuh")
HASH_COMMENTED = (".sh", ".cmake", ".cmake.in", ".py")


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
            elif quote is None and c == "#" and (i == 0 or line[i - 1] in " \t;("):
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


def is_script(path):
    """An extensionless file that starts with #! (.ci/run)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def source_comments(path):
    name = os.path.basename(path)
    if name.endswith(SLASH_COMMENTED):
        extract = slash_comments
    elif name.endswith(HASH_COMMENTED) or name == "CMakeLists.txt" or ("." not in name and is_script(path)):
        extract = hash_comments
    else:
        return []
    with open(path, encoding="utf-8") as f:
        return extract(f.read())
